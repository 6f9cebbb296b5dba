"""Token counting: exact BPE counts offline (toolscope.tokenizer) and schema rendering (engine.tokens)."""
