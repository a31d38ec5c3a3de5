"""The offline designer: a program synthesiser over a grammar of reward terms and features."""
