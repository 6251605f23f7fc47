"""The ``ssdpredict`` command line: parse arguments, call one domain function, print."""
