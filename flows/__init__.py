"""Production flows as DAGs: graph rules, content hashes, readiness, the pricing plan
(pure, `graph.py`), run and result tables (`models.py`), their data access (`runs.py`)."""
