"""The integration tier: tests that start a real program (llama-server, sshd, latexmk,
Chromium, an engine-shaped server or specsweep itself in a subprocess)."""
