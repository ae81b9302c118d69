"""Mail that comes back, read: what an inbound message asks for (``inbound``: unsubscribe,
subscribe, a bounce), a delivery status notification's verdicts (``dsn``), whether a refusal
means the mailbox is gone (``bounces``, one verdict for SMTP replies and notifications), SES's
bounce, complaint and delivery notifications (``ses_events``), and whether a delivered copy's
unsubscribe headers are right (``mail_check``). Bytes in, verdicts out; acting on them is the
inbox stage's (``stages/inbox.py``) and the webhook's (``web/routes.py``), through the
store's ``Feedback`` role.
"""
