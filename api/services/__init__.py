"""What the routes call: the api's use cases (accept a message, answer a card, run a task
control, ...) and the hand-offs to Temporal behind them. Free of HTTP: no FastAPI types,
so the relay and tests call them as the routes do."""
