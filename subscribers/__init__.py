"""Who receives the newsletter: store, tokens, subscribe/confirm/unsubscribe, bounces.

It imports nothing of ``pipeline`` but its errors, records, retry and resource: the commands
and the wiring that opens a store live there.
"""
