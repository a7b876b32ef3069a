"""Every LLM task's prompt module: extract_v1 (facts from a turn window), plan_v1 (the retrieval
planner), rerank_v1 (the reranker), qa_v1 (benchmark answers and judgements).

Each holds its messages, its JSON schema and its version, and parses the reply into typed values;
none does I/O of its own (the caller passes an LLMClient). A prompt change is a new version.
"""
