"""What the tests stand on: the sample project, feeds written to order, ``newsletter`` run in
or out of process, and real services on loopback. conftest.py registers the pytest plugins."""
