"""Screens: setup, live (and replay), runs, compare, help, and the destroy confirmation."""
