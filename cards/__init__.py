"""Cards (docs/architecture.md#rooms): questions put to the person, answered only through
an authenticated action. `store` creates, reads and answers them, `effects` runs what an
answer sets off, `views` is their wire form, `clarify` is routing's "which task?" card."""
