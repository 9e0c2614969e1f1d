"""The HTTP API.

- `app.py` builds the FastAPI app; `deps.py` holds the typed dependencies handlers declare
  (`CurrentUser`, `SessionDep`, `SettingsDep`, ...); `errors.py` the error body; `limits.py`
  and `ratelimit.py` the middleware in front of it all.
- `routes/<resource>.py`: thin handlers. They parse input, call a service or a data-access
  function, and return a response model from `schemas/<resource>.py`.
- `services/`: what the routes call, free of HTTP: accepting a message, answering a card,
  the task controls, and the hand-offs to Temporal with the relay that finishes them.
- `dispatch/`: the Temporal clients (task, main thread, flow run and memory workflows).
"""
