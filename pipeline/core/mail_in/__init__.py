"""Mail that comes back, read: what an inbound message asks for (``inbound``: unsubscribe,
subscribe, a bounce), a delivery status notification's verdicts (``dsn``), whether a refusal
means the mailbox is gone (``bounces``, one verdict for SMTP replies and notifications), SES's
bounce, complaint and delivery notifications (``ses_events``), and whether a delivered copy's
unsubscribe headers are right (``mail_check``). Bytes in, verdicts out; what a bounce or a
complaint does to the list is ``subscribers/bounces.py``'s, whichever carrier brought it (the
webhook, the inbox stage, a relay's refusal during a send).
"""
