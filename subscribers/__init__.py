"""Who receives the newsletter: store, tokens, subscribe/confirm/unsubscribe, bounces.

model.py (records), areas.py (the one normalising of the areas a reader follows; the core
re-exports it), store/ (the SubscriberStore roles; the SQLite and DynamoDB backends),
tokens.py (signed links, shared with the subscription app), subscriptions.py (how people join
and leave). It imports nothing of ``pipeline`` but its errors, records, retry and resource:
the commands (``pipeline/cli/subscribers.py``, ``pipeline/cli/store.py``) and the wiring that
opens a store live there.
"""
