"""Discrete-event simulation of LLM serving."""
