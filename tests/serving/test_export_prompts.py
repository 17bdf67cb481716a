"""The prompts an export carries (issue 32): ``encode`` applies the side the model was
trained on, ``encode_query`` / ``encode_document`` e5's query and passage prefixes."""

from disembed.serving.export import export_prompts


def test_the_default_prompt_is_the_side_the_model_was_trained_on():
    both = {"query": "query: ", "document": "passage: "}
    assert export_prompts("query: ") == (both, "query")
    assert export_prompts("passage: ") == (both, "document")


def test_an_encoder_with_one_prefix_uses_it_for_both_sides_and_none_has_no_prompt():
    assert export_prompts("Represent this: ") == (
        {"query": "Represent this: ", "document": "Represent this: "}, "document")
    assert export_prompts("") == ({}, None)
