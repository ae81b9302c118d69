"""Who receives the newsletter: store, tokens, subscribe/confirm/unsubscribe, bounces.

Empty until delivery lands (issue 3); the folder is part of the layout DESIGN.md fixes.
"""
