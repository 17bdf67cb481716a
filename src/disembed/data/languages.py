"""Language codes: one canonical code per language.

ISO 639-1 (``de``), ISO 639-3 (``deu``), macro/individual variants used by
Tatoeba (``cmn``, ``swh``, ``pes``, ``zsm``) and FLORES-style script tags
(``zho_Hans``, ``deu_Latn``) and BCP-47 tags with region or script (``de-DE``,
``zh-Hant-TW``) all map to one canonical code: the ISO 639-1 code where the
language has one, else the ISO 639-3 code. The code tables are the CLDR's, read
through ``langcodes``. Every well-formed code of a real language is accepted (Yoruba
``yo``/``yor``, Tibetan ``bo``/``bod``/``tib``), also one this project has no data for;
only a malformed code or one that names no language (``xx``, ``zzz``, ``x-private``) is an
error, naming the nearest known codes. Every entry point (API, CLI, data loaders, models)
goes through :func:`normalize_language`; a per-row tag may also be one of
:data:`NO_LANGUAGE` (``und``, ``mul``), which says "no one language": such a row is
handled as untagged (:func:`normalize_tag`).
"""

from __future__ import annotations

import difflib
import functools
import itertools
import re
import string

from ..exceptions import ConfigError

# what a tag without a language means is the routing rule's (one file, shipped with exports)
from ..util.routing_rule import (  # noqa: F401
    NO_LANGUAGE,
    SCRIPT_PARTS,
    UNDETERMINED,
    script_parts,
    script_subtag,
)

# ISO 639-3 (and Tatoeba's individual-language codes) -> canonical ISO 639-1.
_ISO3_TO_1 = {
    "afr": "af", "amh": "am", "ara": "ar", "arb": "ar", "aze": "az", "bel": "be", "ben": "bn",
    "bos": "bs", "bre": "br", "bul": "bg", "cat": "ca", "ces": "cs", "cmn": "zh", "cym": "cy",
    "dan": "da", "deu": "de", "ell": "el", "eng": "en", "epo": "eo", "est": "et", "eus": "eu",
    "fao": "fo", "fas": "fa", "pes": "fa", "fin": "fi", "fra": "fr", "fry": "fy", "gla": "gd",
    "gle": "ga", "glg": "gl", "heb": "he", "hin": "hi", "hrv": "hr", "hun": "hu", "hye": "hy",
    "ido": "io", "ile": "ie", "ina": "ia", "ind": "id", "isl": "is", "ita": "it", "jav": "jv",
    "jpn": "ja", "kat": "ka", "kaz": "kk", "khm": "km", "kor": "ko", "kur": "ku", "lat": "la",
    "lit": "lt", "lav": "lv", "lvs": "lv", "mal": "ml", "mar": "mr", "mkd": "mk", "mon": "mn",
    "msa": "ms", "zsm": "ms", "nld": "nl", "nno": "nn", "nob": "nb", "nor": "no", "oci": "oc",
    "pol": "pl", "por": "pt", "ron": "ro", "rus": "ru", "slk": "sk", "slv": "sl", "spa": "es",
    "sqi": "sq", "srp": "sr", "swa": "sw", "swh": "sw", "swe": "sv", "tam": "ta", "tat": "tt",
    "tel": "te", "tgl": "tl", "tha": "th", "tuk": "tk", "tur": "tr", "uig": "ug", "ukr": "uk",
    "urd": "ur", "uzb": "uz", "vie": "vi", "xho": "xh", "yid": "yi", "zho": "zh", "nep": "ne",
    "npi": "ne", "sin": "si", "pus": "ps", "hbs": "sh", "kab": "kab",
    # the rest of XLM-R's (and so multilingual-e5's) 100 pre-training languages
    "asm": "as", "guj": "gu", "hau": "ha", "kan": "kn", "kir": "ky", "lao": "lo", "mlg": "mg",
    "mya": "my", "orm": "om", "ori": "or", "ory": "or", "pan": "pa", "san": "sa", "snd": "sd",
    "som": "so", "sun": "su",
}

# Languages with no ISO 639-1 code that appear in the bundled data (canonical = 639-3).
_ISO3_ONLY = {
    "ang", "arq", "arz", "ast", "awa", "ber", "cbk", "ceb", "cha", "cor", "csb", "dsb", "dtp",
    "gsw", "hsb", "kab", "kzj", "lfn", "max", "mhr", "nds", "nov", "orv", "pam", "pms", "swg",
    "tzl", "war", "wuu", "yue",
}

_ISO1 = set(_ISO3_TO_1.values()) | {"en"}

# Names people type, lower-cased.
_NAMES = {"english": "en", "german": "de", "chinese": "zh", "french": "fr", "spanish": "es"}

#: XTREME's Tatoeba languages: the 14 XNLI languages and the 36 XTREME languages.
TATOEBA_14 = ("ar", "bg", "de", "el", "es", "fr", "hi", "ru", "sw", "th", "tr", "ur", "vi", "zh")
TATOEBA_36 = (
    "af", "ar", "bg", "bn", "de", "el", "es", "et", "eu", "fa", "fi", "fr", "he", "hi", "hu",
    "id", "it", "ja", "jv", "ka", "kk", "ko", "ml", "mr", "nl", "pt", "ru", "sw", "ta", "te",
    "th", "tl", "tr", "ur", "vi", "zh",
)

#: The 100 languages of XLM-R's pre-training data (multilingual-e5 inherits them).
XLMR_LANGUAGES = frozenset(
    "af am ar as az be bg bn br bs ca cs cy da de el en eo es et eu fa fi fr fy ga gd gl gu ha "
    "he hi hr hu hy id is it ja jv ka kk km kn ko ku ky la lo lt lv mg mk ml mn mr ms my ne nl "
    "no om or pa pl ps pt ro ru sa sd si sk sl so sq sr su sv sw ta te th tl tr ug uk ur uz vi "
    "xh yi zh nb".split()
)


def known_languages() -> list[str]:
    """Every canonical code :func:`normalize_language` returns, sorted."""
    return sorted(_ISO1 | _ISO3_ONLY)


#: where the CLDR's preferred subtag (what ``langcodes`` returns) differs from the code this
#: project, XTREME and Tatoeba's file names use
_CLDR_TO_CANONICAL = {"fil": "tl", "sr": "sr", "iw": "he", "in": "id", "mo": "ro"}

#: ISO 639-2's codes reserved for local use (``qaa``-``qtz``): they name no language
_LOCAL_USE = re.compile("q[a-t][a-z]")


@functools.lru_cache(maxsize=4096)
def _parse(raw: str) -> str | None:
    """The language subtag of ``raw`` by the CLDR's tables (``deu`` -> ``de``, ``zh-Hant-TW``
    -> ``zh``, ``cmn`` -> ``zh``), or ``None`` where it is no well-formed tag of a real
    language (a malformed tag, an unassigned subtag such as ``xx``, private use ``x-...``)."""
    import langcodes

    try:
        tag = langcodes.standardize_tag(raw.replace("_", "-"), macro=True)
        lang = langcodes.Language.get(tag).language
    except ValueError:  # langcodes.tag_parser.LanguageTagError is a ValueError
        return None
    if not lang or "-" in lang or _LOCAL_USE.fullmatch(lang) or not langcodes.tag_is_valid(lang):
        return None
    return _CLDR_TO_CANONICAL.get(lang, lang)


def normalize_language(code: str) -> str:
    """Return the canonical code of ``code``: ISO 639-1 where the language has one, else ISO
    639-3; any case, ISO 639-1/639-3 (``de``, ``deu``), BCP-47 with region or script
    (``de-DE``, ``zh-Hant-TW``), FLORES-style (``zho_Hans``, ``deu_Latn``), Tatoeba's
    individual-language codes (``cmn``, ``swh``, ``pes``) and a few English names.

    The code tables are the CLDR's, through the maintained ``langcodes`` library: every
    real language's code is accepted (``yo``, ``bo``, ``haw``), whether or not this project
    has data for it; the only hand-written tables say which languages this project knows
    (the encoders' pre-training languages and those in the bundled data: their spellings
    win, e.g. ``hbs`` -> ``sh``) and a handful of CLDR preferences it spells differently
    (``fil`` -> ``tl``).

    Raises:
        ConfigError: ``code`` is malformed or names no real language (``xx``, ``zzz``,
            ``und``: use :func:`normalize_tag` for per-row tags that may be undetermined);
            the message names the nearest known codes.
    """
    if not isinstance(code, str) or not code.strip():
        raise ConfigError(f"a language code must be a non-empty string, got {code!r}; give "
                          "an ISO 639-1/639-3 or BCP-47 code such as 'de', 'deu' or 'de-DE'")
    raw = code.strip()
    base = raw.replace("-", "_").split("_")[0].lower()  # zho_Hans -> zho, zh-TW -> zh
    if base in _ISO1 or base in _ISO3_ONLY:
        return base
    if base in _ISO3_TO_1:  # Tatoeba's spellings (hbs -> sh, not the CLDR's sr-Latn)
        return _ISO3_TO_1[base]
    if raw.lower() in _NAMES:
        return _NAMES[raw.lower()]
    parsed = _parse(raw)
    if parsed is not None and parsed not in NO_LANGUAGE:
        return parsed
    if base in NO_LANGUAGE:
        raise ConfigError(f"{code!r} names no one language (BCP-47's 'undetermined' or "
                          "'multiple languages'); give the language's own code, or leave the "
                          "tag out where a model may identify the language from the text")
    raise ConfigError(_unknown_message(code, base))


def normalize_tag(code: str | None) -> str | None:
    """A per-row language tag: ``None`` for no tag or one of :data:`NO_LANGUAGE` (``und``,
    ``mul``: the row's language is then identified from its embedding); ``und-Hani`` for
    an undetermined language with a script subtag (``und-Hani``, ``mul_hani``,
    ``und-Hani-TW``: identified among the languages that write Han, see
    :func:`script_subtag`); else :func:`normalize_language`'s canonical code."""
    if code is None:
        return None
    if isinstance(code, str) and code.strip().replace("_", "-").split("-")[0].lower() \
            in NO_LANGUAGE:
        script = script_subtag(code)
        return None if script is None else f"{UNDETERMINED}-{script}"
    return normalize_language(code)


#: languages widely written in more than their CLDR likely script
_OTHER_SCRIPTS = {
    "sr": ("Latn",), "sh": ("Cyrl",), "bs": ("Cyrl",), "uz": ("Cyrl",), "az": ("Cyrl", "Arab"),
    "kk": ("Latn",), "ky": ("Latn",), "tk": ("Cyrl",), "tt": ("Latn",), "mn": ("Mong",),
    "pa": ("Arab",), "sd": ("Deva",), "ks": ("Deva",), "ku": ("Arab",), "ug": ("Cyrl", "Latn"),
    "ms": ("Arab",), "ha": ("Arab",), "ko": ("Hani",), "ja": ("Hani", "Hira", "Kana"),
}


@functools.lru_cache(maxsize=1024)
def language_scripts(code: str) -> frozenset[str]:
    """The ISO 15924 scripts a language is written in (``zh`` -> Hani, ``ja`` -> Hani,
    Hira, Kana, ``sr`` -> Cyrl, Latn): its CLDR likely script (:func:`language_script`),
    split where it stands for several, and a short list of languages widely written in a
    second one. A router restricts an ``und-<script>`` row to the languages that write
    its script."""
    canonical = normalize_language(code)
    script = language_script(canonical).rsplit("-", 1)[1]
    return frozenset(script_parts(script) + _OTHER_SCRIPTS.get(canonical, ()))


@functools.lru_cache(maxsize=1)
def valid_language_subtags() -> tuple[str, ...]:
    """Every two- and three-letter language subtag the CLDR's tables assign to a language
    (``aa`` ... ``zzj``, about 8,000; not the local-use ``qaa``-``qtz``), for a process that
    cannot ask ``langcodes`` (an export)."""
    import langcodes

    letters = string.ascii_lowercase
    codes = ("".join(t) for n in (2, 3) for t in itertools.product(letters, repeat=n))
    return tuple(c for c in codes if not _LOCAL_USE.fullmatch(c) and langcodes.tag_is_valid(c))


def _unknown_message(code: str, base: str) -> str:
    known = known_languages()
    close = difflib.get_close_matches(base, known + list(_ISO3_TO_1), n=3, cutoff=0.5)
    close = list(dict.fromkeys(_ISO3_TO_1.get(c, c) for c in close))
    nearest = f"nearest known: {', '.join(close)}" if close else "no known code is close"
    return (f"Unknown language code {code!r} ({nearest}): expected a well-formed ISO "
            "639-1/639-3 or BCP-47 code of a real language, e.g. 'de', 'deu', 'de-DE', "
            f"'zho_Hans' or 'yo'. Codes this project has data for: {', '.join(known)}")


#: scripts where MTEB's task metadata differs from the CLDR's likely script (or the CLDR has
#: none): Korean as Hangul, and three Tatoeba languages the CLDR tables do not know
_MTEB_SCRIPTS = {"ko": "Hang", "orv": "Cyrl", "max": "Deva", "ber": "Tfng"}


def language_script(code: str) -> str:
    """``code`` as MTEB's language-script code: ISO 639-3 (Tatoeba's spelling), a hyphen,
    the ISO 15924 script (``de`` -> ``deu-Latn``, ``zh`` -> ``cmn-Hans``)."""
    import langcodes

    canonical = normalize_language(code)
    script = _MTEB_SCRIPTS.get(canonical) or langcodes.Language.get(canonical).maximize().script
    return f"{to_iso3(canonical)}-{script or 'Zyyy'}"


def to_iso3(code: str) -> str:
    """Canonical code -> the ISO 639-3 code Tatoeba's file names use (``zh`` -> ``cmn``)."""
    canonical = normalize_language(code)
    preferred = {"zh": "cmn", "sw": "swh", "fa": "pes", "ms": "zsm", "lv": "lvs", "ar": "ara"}
    if canonical in preferred:
        return preferred[canonical]
    for iso3, iso1 in _ISO3_TO_1.items():
        if iso1 == canonical and len(iso3) == 3:
            return iso3
    return canonical
