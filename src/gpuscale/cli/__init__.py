"""The thin command line: parse, call the library, render."""
