"""Backends: each turns the scheduler's kernel descriptions into code it compiles and runs."""
