"""The flow room's exception root: a graph the platform cannot run."""

from __future__ import annotations

from lomo.errors import FlowTooLarge, InvalidInput


class FlowError(InvalidInput):
    """A flow that cannot run as it is (unknown node type, cycle, bad node id)."""

    code = "invalid_flow"


class FlowTooLargeToRun(FlowError, FlowTooLarge):
    """More nodes than one run's history holds (lomo/limits.py); stored before the limit."""

    code = "flow_too_large"
