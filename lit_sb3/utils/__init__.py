"""Utilities: math, system info, training helpers, save/load."""
