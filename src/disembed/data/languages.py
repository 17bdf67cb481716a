"""Language codes: one canonical code per language.

ISO 639-1 (``de``), ISO 639-3 (``deu``), macro/individual variants used by
Tatoeba (``cmn``, ``swh``, ``pes``, ``zsm``) and FLORES-style script tags
(``zho_Hans``, ``deu_Latn``) and BCP-47 tags with region or script (``de-DE``,
``zh-Hant-TW``) all map to one canonical code: the ISO 639-1 code where the
language has one, else the ISO 639-3 code. The code tables are the CLDR's, read
through ``langcodes``. Unknown codes are an error naming the nearest known ones.
Every entry point (API, CLI, data loaders, models) goes through
:func:`normalize_language`.
"""

from __future__ import annotations

import difflib

from ..exceptions import ConfigError

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


def _parse(raw: str) -> str | None:
    """The language subtag of ``raw`` by the CLDR's tables (``deu`` -> ``de``, ``zh-Hant-TW``
    -> ``zh``, ``cmn`` -> ``zh``), or ``None`` where it is no well-formed tag."""
    import langcodes

    try:
        tag = langcodes.standardize_tag(raw.replace("_", "-"), macro=True)
    except ValueError:  # langcodes.tag_parser.LanguageTagError is a ValueError
        return None
    lang = langcodes.Language.get(tag).language
    return _CLDR_TO_CANONICAL.get(lang, lang) if lang else None


def normalize_language(code: str) -> str:
    """Return the canonical code of ``code``: ISO 639-1 where the language has one, else ISO
    639-3; any case, ISO 639-1/639-3 (``de``, ``deu``), BCP-47 with region or script
    (``de-DE``, ``zh-Hant-TW``), FLORES-style (``zho_Hans``, ``deu_Latn``), Tatoeba's
    individual-language codes (``cmn``, ``swh``, ``pes``) and a few English names.

    The code tables are the CLDR's, through the maintained ``langcodes`` library; the only
    hand-written tables say which languages this project knows (the encoders' pre-training
    languages and those in the bundled data) and a handful of CLDR preferences it spells
    differently (``fil`` -> ``tl``).

    Raises:
        ConfigError: the code is not a language this project knows; the message names the
            nearest known codes.
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
    if parsed in _ISO1 or parsed in _ISO3_ONLY:
        return parsed
    raise ConfigError(_unknown_message(code, base))


def _unknown_message(code: str, base: str) -> str:
    known = known_languages()
    close = difflib.get_close_matches(base, known + list(_ISO3_TO_1), n=3, cutoff=0.5)
    close = list(dict.fromkeys(_ISO3_TO_1.get(c, c) for c in close))
    nearest = f"nearest known: {', '.join(close)}" if close else "no known code is close"
    return (f"Unknown language code {code!r} ({nearest}): expected an ISO 639-1/639-3 or "
            "BCP-47 code of a language this project knows, e.g. 'de', 'deu', "
            f"'de-DE' or 'zho_Hans'. Known codes: {', '.join(known)}")


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
