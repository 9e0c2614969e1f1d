"""One router per resource; `api/app.py` includes them all."""
