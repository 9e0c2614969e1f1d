"""The api's request bodies and response models, one module per resource (pydantic only).

A response field that defaults to None is one the JSON leaves out when it does not apply
(a message's `decision` before routing, a card's `price`): the routes returning such a
model set `response_model_exclude_unset=True`, so the wire shows exactly the keys the view
set (tests/test_openapi_shapes.py checks both)."""
