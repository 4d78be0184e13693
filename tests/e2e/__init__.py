"""The end-to-end tier: whole campaigns from a plan to a report (llama-server, SSH, Ray)."""
