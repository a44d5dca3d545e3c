"""The package's version: libkotoba-client's (KOTOBA_CLIENT_VERSION in
client/kotoba-client.h), which the tests check it equals."""
__version__ = "0.3.0"
