"""Bytes → records: which logs to read (`inputs`), bounded gunzip (`gunzip`), line scanning (`lines`),
glog envelopes and payloads into `Record`s (`records`), and the forked scanning child (`forked`)."""
