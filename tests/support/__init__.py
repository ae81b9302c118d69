"""What the tests lean on and do not test: the sample project (``project``), feeds written to
order (``feeds``), ``newsletter`` run in or out of process (``commands``), HTML as a mail app
reads it (``markup``), the link check of a published archive (``links``); loopback servers
(SMTP, moto, TLS), Chromium, the subscription app and a published archive started for real,
DynamoDB's tables, the SNS signer, the suite's scheduler and its duration warning. Test
modules import them as ``support.<name>``; ``conftest.py`` registers the ones that are pytest
plugins."""
