"""Neural-network building blocks below the commands: training recipes (resumable fits)."""
