"""Core types, schedules, noise, preprocessing and evaluation."""
