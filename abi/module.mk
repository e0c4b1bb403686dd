# abi/: the contracts between coprof's processes (abi/README.md).  The
# headers are installed with the rest, under include/coprof/abi/.

INSTALL_HEADERS += $(wildcard abi/*.h)
