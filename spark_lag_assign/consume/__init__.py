"""The consuming side: pipelines that read as the plan says (being rewritten; see stream.py)."""
