"""The worker: wires client, data converter, workflows and activities."""
