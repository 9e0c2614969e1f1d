"""The HTTP API: thin routes over data access and the Temporal client."""
