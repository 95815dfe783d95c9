"""Rendering only: results come in, files and tables go out."""
