"""The context builder: a step's model request, built from what the step's storage loaded
(stable prefix first, dynamic tail last), the tool set and the context policy."""
