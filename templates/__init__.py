"""Jinja2 templates: shipped as package data."""
