"""Production flows as DAGs: graph rules, content hashes, readiness, the pricing plan
(pure, `graph.py`), what a node uses of a document (pure, `uses.py`), why a run re-makes a
node and the price card that says so (pure, `remake.py`), run and result tables
(`models.py`), their data access (`runs.py`)."""
