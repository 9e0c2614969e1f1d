"""The model layer: the provider interface and its request and response types (types.py)
and the real provider, Anthropic's Messages API (anthropic_provider.py). It imports only the
kernel; the stand-ins for the model are in `standin/`."""
