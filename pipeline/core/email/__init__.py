"""The email: an ``Issue`` → the parts a reader gets, within the size budget, and the bytes
a transport carries.

``render`` draws each layout (MJML HTML and a plain-text part ``wrap`` folds at 78 columns)
and fits it to the budget, ``mime`` and ``eightbit`` choose and apply a part's transfer
encoding, ``message`` builds one recipient's message, ``addresses`` writes an address as the
wire carries it. Pure: strings and records in, strings and bytes out.
"""
