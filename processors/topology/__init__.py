"""The topology scanner (the Guide's chapter 9): what a surface should look like versus
what traffic shows, computed in ClickHouse.

    contract (schemas.registry)   structural_inventories   evaluation_events
             \\                            |                      /
              +---------------------- scan.py ------------------+  -> report,
                                                                    analysis_events
    inventory.py  the one writer of structural_inventories, and its latest-per-consumer read
    bootstrap.py  proposes a contract surface entry from a surface's traffic
"""
