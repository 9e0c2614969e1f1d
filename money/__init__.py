"""Money: catalogue and quotes, orders and the job state machine, the ledger, budgets and
approvals, price cards (docs/architecture.md#money)."""
