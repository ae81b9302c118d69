"""Who receives the newsletter: store, tokens, subscribe/confirm/unsubscribe, bounces.

model.py (records), store.py (SQLite; the SubscriberStore protocol), tokens.py (signed
links, shared with the subscription app), commands.py (`newsletter subscribers …`).
"""
