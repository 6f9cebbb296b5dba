"""The default tool_search ranking, bm25f-2 (engine/ranking.py), its text analysis
(engine/text.py), and the versioning that keeps a published policy's ranking (engine/search.py)."""

from __future__ import annotations

import pytest
import snowballstemmer
from toolscope_agent.engine import ranking, ranking_fuzzy, text
from toolscope_agent.engine.search import (
    DEFAULT_RANKER,
    LEGACY_RANKER,
    SearchIndex,
    ranker_for,
    search_tools,
)


def names(hits) -> list[str]:
    """The tools the query matched (a search pads its answer with unmatched ones: test_search.py)."""
    return [hit.name for hit in hits if hit.matched]


def tool(name: str, description: str = "", **parameters: str) -> dict:
    properties = {key: {"type": "string", "description": value} for key, value in parameters.items()}
    return {"name": name, "description": description, "input_schema": {"type": "object", "properties": properties}}


@pytest.mark.parametrize(("identifier", "words"), [
    ("git_diff_unstaged", ["git", "diff", "unstaged"]),
    ("getUserInfo", ["get", "user", "info"]),
    ("HTTPServer.start", ["http", "server", "start"]),
    ("list-files", ["list", "files"]),
    ("s3bucket", ["s", "3", "bucket"]),
    ("math.factorial", ["math", "factorial"]),
    ("Größe_Datei", ["größe", "datei"]),
])
def test_identifiers_split_where_their_writers_split_them(identifier, words):
    assert list(text.words(identifier)) == words


def test_terms_drop_stopwords_numbers_and_single_letters_and_are_stemmed():
    assert text.terms("Could you please find the 5 files changed in a different commit?") == [
        "find", "file", "chang", "differ", "commit"]


def test_a_rare_word_outweighs_common_ones():
    catalog = [tool(f"tool_{i}", "Would return the file for a user.") for i in range(30)]
    catalog.append(tool("book_salon", "Book an appointment with a hair stylist."))
    hits = search_tools(catalog, "would you find me a stylist for my file")
    assert names(hits)[0] == "book_salon"


def test_a_name_word_counts_more_than_a_description_word():
    catalog = [tool("deploy_app", "Ship the service."), tool("ship_release", "Deploy the service.")]
    assert names(search_tools(catalog, "deploy")) == ["deploy_app", "ship_release"]


def test_parameters_are_indexed():
    catalog = [tool("convert", "Convert a value.", timezone="IANA timezone name such as Europe/Paris"),
               tool("scale", "Scale a value.", factor="multiplier")]
    assert names(search_tools(catalog, "timezone"))[0] == "convert"
    assert names(search_tools(catalog, "paris"))[0] == "convert"


def test_string_enum_values_are_indexed():
    schema = {"type": "object", "properties": {"unit": {"enum": ["celsius", "fahrenheit"]}}}
    catalog = [{"name": "weather", "description": "Current weather.", "input_schema": schema},
               tool("news", "Current news.")]
    assert names(search_tools(catalog, "fahrenheit")) == ["weather"]


def test_every_query_word_is_read_however_long_the_query():
    catalog = [tool("translate", "Translate text between languages."), tool("noop", "Does nothing at all.")]
    query = " ".join(["word"] * 30 + ["translate"])
    assert names(search_tools(catalog, query)) == ["translate"]


@pytest.mark.parametrize(("query", "not_found"), [
    ("detailed report", "tail"),
    ("a different approach", "diff"),
    ("the march release", "search"),
    ("outlook", "look"),
])
def test_names_match_whole_words_not_substrings(query, not_found):
    catalog = [tool("tail", "Print the end of a file."), tool("diff", "Compare two files."),
               tool("search", "Find text in files."), tool("look", "Open a file."),
               tool("report", "Write a report about a release."), tool("approach", "Plan an approach.")]
    assert not_found not in names(search_tools(catalog, query, top_k=20))


def test_stems_match_inflections():
    catalog = [tool("find", "Locate files by pattern."), tool("read", "Read a file.")]
    assert names(search_tools(catalog, "finding"))[0] == "find"
    assert names(search_tools(catalog, "locating files by patterns"))[0] == "find"


def test_no_score_floor_one_shared_rare_word_is_enough_and_nothing_shared_is_nothing():
    catalog = [tool(f"t{i}", f"Does thing number {i} with widgets.") for i in range(50)]
    catalog.append(tool("kraken", "Release the creature."))
    assert names(search_tools(catalog, "please release everything now")) == ["kraken"]
    assert names(search_tools(catalog, "zebra quasar")) == []


def test_a_name_whose_every_word_is_in_the_query_gets_the_name_words_bonus():
    catalog = [tool("create_pull_request", "Open a PR."), tool("create_issue", "Open a pull request or issue.")]
    hits = search_tools(catalog, "create a pull request")
    assert names(hits)[0] == "create_pull_request"
    assert hits[0].score - hits[1].score > ranking.NAME_WORDS / 2


def test_history_finds_a_tool_whose_name_and_description_say_nothing():
    catalog = [tool("x7", "Internal helper."), tool("release_notes", "Draft release notes.")]
    assert "x7" not in names(search_tools(catalog, "rotate the signing keys"))
    history = {"x7": ["rotate signing keys for prod", "key rotation"]}
    assert names(search_tools(catalog, "rotate the signing keys", history=history)) == ["x7"]


def test_history_of_an_unknown_tool_or_odd_values_changes_nothing():
    catalog = [tool("read", "Read a file."), tool("write", "Write a file.")]
    plain = search_tools(catalog, "file")
    odd = {"ghost": ["file file file"], "read": "not a list", "write": [3, None]}
    assert search_tools(catalog, "file", history=odd) == plain


def test_the_index_cache_tells_histories_and_rankers_apart():
    catalog = [tool("x7", "Internal helper."), tool("y8", "Internal helper.")]
    assert names(search_tools(catalog, "backup", history={"x7": ["backup"]})) == ["x7"]
    assert names(search_tools(catalog, "backup", history={"y8": ["backup"]})) == ["y8"]
    assert names(search_tools(catalog, "backup")) == []
    assert search_tools(catalog, "internal", ranker=LEGACY_RANKER) != search_tools(catalog, "internal")


def test_the_legacy_ranker_ranks_as_before_versions():
    # Figures of the first ranking (its tests before bm25f-2): an exact name scores over 14, and
    # a query word and description word sharing only a bigram are not a hit.
    catalog = [tool("git_status", "Show the working tree status."), tool("git_diff", "Show changes between commits.")]
    hits = search_tools(catalog, "git_status", ranker=LEGACY_RANKER)
    assert names(hits) == ["git_status", "git_diff"] and hits[0].score > 14 > hits[1].score
    assert search_tools(catalog, "zzz status", ranker=LEGACY_RANKER)[0].score >= ranking_fuzzy.MIN_SCORE


def test_an_unknown_ranker_is_refused_by_the_index():
    with pytest.raises(ValueError, match="unknown ranker 'bm99'"):
        SearchIndex([tool("a")], ranker="bm99")


@pytest.mark.parametrize(("settings", "version"), [
    ({"top_k": 8}, LEGACY_RANKER),  # published before rankers were versioned
    ({"top_k": 8, "ranker": "bm25f-2"}, "bm25f-2"),
    ({"ranker": "fuzzy-1"}, "fuzzy-1"),
    ({"ranker": "neural-9"}, DEFAULT_RANKER),  # from a newer server: rank, with the best known
    ({"ranker": 7}, DEFAULT_RANKER),
    (None, DEFAULT_RANKER),
])
def test_ranker_for_reads_the_policy(settings, version):
    assert ranker_for(settings) == version


def test_the_pure_python_stemmer_and_pystemmer_agree():
    # snowballstemmer runs PyStemmer when it is installed (the server), its own Python otherwise
    # (an SDK without the extra): both must index alike.
    stemmer_module = pytest.importorskip("Stemmer")
    from snowballstemmer.english_stemmer import EnglishStemmer

    with open(ranking.__file__, encoding="utf-8") as source:
        words = set(text.words(source.read()))
    words |= {"running", "generously", "happiness", "crying", "organization", "searches", "analyses"}
    python_stems = {word: EnglishStemmer().stemWord(word) for word in words}
    c_stems = {word: stemmer_module.Stemmer("english").stemWord(word) for word in words}
    assert python_stems == c_stems
    assert snowballstemmer.stemmer("english").stemWord("finding") == "find"


def test_history_lifts_a_near_repeat_but_a_loose_resemblance_adds_nothing():
    catalog = [tool("weather_now", "Current weather for a city."), tool("forecast", "Forecast for the coming days.")]
    history = {"forecast": ["what will the weather be in Paris next week", "weather in Lisbon next month"]}
    plain = search_tools(catalog, "weather in Berlin")
    assert names(plain)[0] == "weather_now"
    assert search_tools(catalog, "weather in Berlin", history=history) == plain
    repeat = search_tools(catalog, "what will the weather be in Paris next week?", history=history)
    assert names(repeat)[0] == "forecast"
