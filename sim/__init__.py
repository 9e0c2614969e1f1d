"""Generation-vendor simulator.

A small FastAPI service that behaves like an external image/video/audio/3D generation
vendor: asynchronous jobs, signed webhooks, polling, real output files, and injectable
faults (duplicate/out-of-order/dropped callbacks, slow submits, random failures).
"""
