"""Prints the launcher variables a torch script reads (run under chorus-run)."""

import os

names = ["CHORUS_RANK", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
         "MASTER_ADDR", "MASTER_PORT"]
print("ENV " + " ".join(f"{n}={os.environ.get(n, '<unset>')}" for n in names), flush=True)
