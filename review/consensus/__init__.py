"""Consensus (Delphi) rounds: reveal the panel's answers anonymously, revise, stop by a rule."""
