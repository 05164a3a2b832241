"""What the abstracts can answer, and answers without an LLM: the abstract sentences that best answer
the question, each cited.

``ExtractiveAnswerer.plan`` decides, for every answer writer, what the retrieved papers can answer:

* ``not_covered``: no retrieved paper is about what the question asks (a multi-paper question whose
  topic words no candidate mentions);
* ``not_stated``: the question asks a detail of a paper that exists, but its abstract does not state it:
  it never mentions a name the question gives (a benchmark, a model, a baseline), the question asks for a
  figure and no sentence gives one of the kind asked (a speed-up, an accuracy, a learning rate), or it asks
  which model the paper builds on ("which base LLM ...?") and the abstract names nothing but the paper itself;
* ``answer``: the papers that qualify (for "which papers ..." questions, every one likely enough to be
  about the question's topic: rag/answers/membership.py) with their best evidence sentences.

``write`` turns an answer plan into text quoted from the abstracts, each sentence cited: always grounded
and fast.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cache

import numpy as np

from rag.answers.membership import FEATURES, MembershipParams, chances, list_topic, listed, membership_features
from rag.answers.sentence_kinds import asks_for_findings, can_lead_with_finding, sentence_penalties
from rag.corpus.chunking import split_sentences
from rag.corpus.titles import is_generic, looks_coined, name_regex
from rag.embedding.models import Embedder
from rag.plain_text import readable
from rag.types import Hit
from store.bm25 import Analyzer, LexicalParams

# Words a question uses to ask, not to say what it is about.
_QUESTION_WORDS = (
    "etc etcetera "  # "(clinical QA, medical imaging, etc.)": a list trails off, it names no topic
    "paper papers work works method methods approach approaches author authors propose proposed use used using "
    "study studies describe described present presented introduce introduced evaluate evaluated evaluation what "
    "which how many much does do did is are was were there any kind type main key new novel model models result "
    "results show shows report reported achieve achieved define defines defined call called name named roughly "
    "approximately about them they it its their whose this that these those get gets give gives have has had "
    # Chat fillers ("anything about heart sounds?", "I'm looking for ...", "is there something here on speech?"):
    # no abstract uses them, and they name no topic the corpus lacks.
    "anything something everything stuff thing things here anyone anybody someone somebody looking look want "
    "wondering curious interested know tell please "
    "list show find collection corpus"  # "List all the federated learning papers in the collection."
)
# Verbs and nouns that ask what a named paper does ("What does PRM-BiasBench measure?", "What problem does X
# tackle?"): the abstract answers in its own words ("quantify", "address"), so they are not details it must state.
_ASKS_WHAT_IT_DOES = (
    "measure measures measured measuring quantify quantifies assess assesses test tests solve solves tackle tackles "
    "address addresses target targets aim aims goal goals purpose focus focuses contribution contributions idea "
    "ideas offer offers provide provides improve improves help helps mean means problem problems "
    "reach reaches reached obtain obtains attain attains "  # "What accuracy does MA-RAG reach?"
    "size sizes big large "  # "BFCL Audio size? number of tasks", "how big is MADQA?"
    # "How many tasks does it contain?"
    "contain contains contained comprise comprises consist consists include includes "
    "perform performs performed performance well "  # "How well does MA-RAG perform?"
    # ... or ask for it in brief: "summarize CogRouter in one sentence", "explain MA-RAG", "ELI5 ConPress".
    "summarize summarise summary tldr tl dr eli5 explain overview gist nutshell brief briefly short shortly "
    "simple simply plain sentence sentences words one two three "
    # ... or what kind of thing the answer names ("which metrics does CaliDist improve over the baselines?"):
    # the abstract names them ("ECE"), it need not say "metrics".
    "metric metrics dataset datasets benchmark benchmarks baseline baselines over number numbers"
)
# What "how much better is X than ...?" compares with, in the question's words rather than the abstract's.
_COMPARED_WITH = ("than better worse baseline baselines other others prior previous existing competing competitors "
                  "alternatives sota state-of-the-art")
_MULTI = re.compile(r"\b(which|what|any|are there|list|find)\b.{0,40}\b(papers|works|methods|approaches|abstracts)\b",
                    re.IGNORECASE)


# Other ways to ask for every paper on a topic: "Any work on X?", "Is there a paper about X?", "Show me papers on
# X", "papers on X", "Does any paper use X?", "What research has been done on X?".
_ASKS_FOR_ANY = re.compile(
    r"^\W*(?:(?:is|are)\s+there\s+(?:any\s+|a\s+|some\s+)?(?:papers?|works?|research|stud(?:y|ies)|articles?)\b"
    r"|any(?:thing)?\s+(?:papers?|works?|research|stud(?:y|ies))\s+(?:on|about|that|which|where|using|for)\b"
    r"|(?:show|give|tell)\s+(?:me\s+)?(?:about\s+)?(?:all\s+|any\s+)?(?:the\s+)?(?:papers|works|studies)\b"
    r"|(?:papers|works|studies|research)\s+(?:on|about|that|using|which|where)\b"
    r"|(?:does|do|did|has|have)\s+any\s+(?:papers?|works?|stud(?:y|ies))\b"
    r"|what\s+(?:work|research)\s+(?:has|have|is|exists)\b"
    r"|(?:list|show|find|give)\s+(?:me\s+)?(?:all\s+)?(?:the\s+)?(?:work|research|literature)\s+(?:on|about|that|using|in)\b)",
    re.IGNORECASE,
)
# "How many papers ...": a question about the collection, answered by listing (and counting) what qualifies.
_COUNT_PAPERS = re.compile(r"\bhow many (?:[\w-]+ ){0,2}?(?:papers|works|abstracts|studies|articles|submissions)\b",
                           re.IGNORECASE)
# A question that asks for a figure: "how many ...", "by how much", "what accuracy ...".
_METRIC = (r"accuracy|auroc|auc|score|f1|bleu|rouge|speed-?ups?|throughput|latency|ece|fid|dice|psnr|pesq|ssim|"
           r"lpips|r\^?2|r²|r-squared|correlation|mse|mae|rmse|ndcg|mrr|pass@\w+|wer|nll|error rate|percentage|"
           r"fraction|bitrate|perplexity|(?:[\w-]+ )?rates?")
_ASKS_FIGURE = re.compile(
    r"\bhow (?:many|much|long|large|big|fast|often)\b|\bby how\b|\bnumber of\b|"
    r"\b(?:by\s+)?what\s+(?:factor|margin|percentage|multiple)\b|"
    rf"\bwhat(?:'s)? (?:[\w-]+ ){{0,3}}?(?P<noun>{_METRIC}|learning rate|batch size|hyperparameters?|values?|"
    r"thresholds?|parameter counts?|context lengths?|sequence lengths?|model sizes?|training costs?|training time|"
    r"compute budget|temperatures?|dropout|weight decay|momentum|step sizes?|window sizes?|epochs|warm-?up steps)"
    r"(?![\w-])",  # not the "R2" of "R2-Router"
    re.IGNORECASE,
)
# Typed as a search ("GPUA zero-shot ImageNet top-1 accuracy?"): a question that only names a metric asks its figure.
_TERSE_FIGURE = re.compile(rf"\b(?P<noun>{_METRIC})\W*$", re.IGNORECASE)
_ASKS_ANYTHING_ELSE = re.compile(
    r"\b(?:what|which|who|whom|why|when|where|how|is|are|was|were|does|do|did|can|could|should|would|will|has|have|"
    r"list|show|tell|explain|summari[sz]e|compare|papers?)\b", re.IGNORECASE)
# "How much better is it than the baselines?": a figure beside a word of improvement answers ("2.5--4.5% accuracy
# improvements over state-of-the-art methods"), whichever words the question compares with.
_ASKS_IMPROVEMENT = re.compile(
    r"(?:by\s+)?how\s+much\s+(?:better|worse|higher|lower|more|less|improv\w*|gains?|faster|slower|smaller|larger|"
    r"bigger|cheaper|fewer)\b"
    # "By how much did it beat the version that ...?", "how much does X outperform Y by?"
    r"|(?:by\s+)?how\s+much\s+(?:[\w-]+\s+){0,3}?(?:beat|beats|outperform\w*|exceed\w*|surpass\w*|improve\w*)\b",
    re.IGNORECASE)
_IMPROVEMENT = re.compile(
    r"\b(?:improv\w*|outperform\w*|gains?|better|higher|lower|reduc\w*|faster|slower|fewer|less|more|surpass\w*|"
    r"exceed\w*|boost\w*|speed-?ups?|cuts?|over)\b|\d\s*[x\u00d7](?!\w)", re.IGNORECASE)
# What a figure question asks for ("what wall-clock speed-up ...") and what a sentence must have to give that
# kind of figure: a "2D" or "half precision" beside the paper's topic words is no speed-up.
_FIGURE_KINDS = (
    (re.compile(r"\b(?:accuracy|auroc|auc|score|f1|success rate|win rate|percentage|fraction|error rate|dice|ece)\b",
                re.IGNORECASE),
     re.compile(r"%|\bper ?cent\b|\bpoints?\b|\b(?:accuracy|auroc|auc|scores?|f1|success|win rates?|error|dice|ece)\b",
                re.IGNORECASE)),
    (re.compile(r"\b(?:speed-?ups?|throughput|latency)\b", re.IGNORECASE),
     re.compile(r"\bspeed-?ups?\b|\bfaster\b|\bslower\b|\bthroughput\b|\blatency\b|\d\s*[x\u00d7](?!\w)|\u00d7|\btimes\b",
                re.IGNORECASE)),
    (re.compile(r"\b(?:learning rate|batch size|hyperparameters?)\b", re.IGNORECASE),
     re.compile(r"\b(?:learning[- ]rates?|batch[- ]sizes?|hyperparameters?)\b", re.IGNORECASE)),
    (re.compile(r"\b(?:bleu|rouge|fid|psnr|pesq|bitrate|perplexity)\b", re.IGNORECASE),
     re.compile(r"\b(?:bleu|rouge|fid|psnr|pesq|bit-?rates?|perplexity|db)\b", re.IGNORECASE)),
)
# A question asking which model a paper builds on ("Which base LLM did they use?"): the abstract must name one.
# Models only: datasets and benchmarks are often described rather than named ("28 tabular datasets"), and the
# description answers.
_HARDWARE = r"gpus?|tpus?|hardware|accelerators?"
_ASKS_NAME = re.compile(
    r"^\W*(?:which|what)\s+(?:(?!(?:papers?|works?|studies|methods|approaches)\b)[\w-]+\s+){0,2}?"
    r"(?:llms?|(?:large |vision-)?language models?|backbones?|base models?|foundation models?|pre-?trained models?|"
    rf"{_HARDWARE})"
    r"(?:\s+(?:llms?|models?))?\b",
    re.IGNORECASE,
)
_COUNT = r"(?:two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|\d{1,2})"  # "which four/12 X"
# The kinds of thing a question asks the names of ("which four benchmarks", "the names of the datasets").
_NAMEABLE = (r"datasets?|benchmarks?|baselines?|models?|llms?|methods?|tasks?|environments?|metrics?|languages?|"
             r"tools?|games?|domains?")
_NAMED_KINDS = rf"{_NAMEABLE}|agents?"
# "Which specific model ...?", "which four benchmarks ...?": a question that already knows how many, or wants the
# exact one, asks for names; "four multimodal benchmarks" does not answer it.
_ASKS_WHICH_EXACTLY = re.compile(
    r"^\W*(?:(?:which|what)(?:\s+(?:are|were|was|is)\s+the)?|(?:can\s+you\s+|please\s+)?(?:list|name)\s+(?:all\s+)?the)"
    r"\s+(?:(?:specific|exact|particular|actual)\s+|"
    rf"{_COUNT}\s+)"
    rf"(?:[\w-]+\s+){{0,2}}?(?P<kind>{_NAMED_KINDS}|architectures?|algorithms?|modalities)\b",
    re.IGNORECASE,
)
# A question that asks outright for names ("What are the names of the four benchmarks ...?", "Name the datasets
# ..."): there a description ("four multimodal benchmarks") does not answer, whatever is named.
_ASKS_NAMES_OF = re.compile(
    r"\b(?:names?\s+of|name\s+(?:the|all|each|every))\s+(?:(?:the|its|their|all|each|every)\s+)?"
    rf"(?:[\w-]+\s+){{0,3}}?({_NAMEABLE})\b",
    re.IGNORECASE,
)
# "RepCore is evaluated on five benchmarks: which ones are they?": the count is known, the names are asked.
_WHICH_ONES = re.compile(
    rf"\b{_COUNT}\s+(?:[\w-]+\s+){{0,2}}?"
    rf"({_NAMED_KINDS})\b[^?]{{0,40}}?\b(?:which|what)\s+(?:ones|are\s+they|were\s+they)\b", re.IGNORECASE)
# "Which agents or models were evaluated on MADQA?": what was run is asked by name.
_WHICH_WERE_RUN = re.compile(
    rf"^\W*(?:which|what)\s+(?:[\w-]+\s+){{0,1}}?(?P<kind>{_NAMED_KINDS})(?:\s+(?:or|and)\s+(?:{_NAMED_KINDS}))?\s+"
    r"(?:were|was|are|is|got|get)\s+(?:\w+\s+)?(?:evaluated|tested|benchmarked|compared|run|used|assessed)\b",
    re.IGNORECASE)
# A paper's own limitations asked for ("What is the main limitation of Caracal?", "any weaknesses?"), not those of
# the work it improves on ("which limitation of existing methods does it address?"), and what states one.
_ASKS_OWN_LIMITATION = re.compile(r"\b(?:limitations?|weakness(?:es)?|drawbacks?|shortcomings?|downsides?|caveats?|"
                                  r"failure modes?|where (?:does|do) (?:it|they) fail)\b", re.IGNORECASE)
_OF_OTHERS = re.compile(r"\b(?:existing|prior|previous|current|conventional|traditional|other|earlier|baselines?|"
                        r"address\w*|overcom\w*|solv\w*|fix\w*|tackl\w*|motivat\w*)\b", re.IGNORECASE)
_SAYS_OWN_LIMITATION = re.compile(
    r"\b(?:limitations?|limited to|weakness(?:es)?|drawbacks?|shortcomings?|caveats?|future work|remains? (?:an )?open|"
    r"does not (?:yet )?(?:handle|scale|apply|support|address)|cannot|fails? (?:to|on|when))\b", re.IGNORECASE)
_OWN = re.compile(r"\b(?:we|our|this (?:paper|work|method|approach|model|framework|study)|the proposed)\b",
                  re.IGNORECASE)  # a sentence about the paper itself, not the field it starts from
# Hardware asked for ("What GPU did they train on?") and the names that answer: "100k+ GPUs" names no GPU.
_ASKS_HARDWARE = re.compile(rf"\b(?:{_HARDWARE})\b", re.IGNORECASE)
_HARDWARE_NAME = re.compile(
    r"\b(?:[AHVTLBP]\d{1,4}(?:\s?(?:GPUs?|SXM|PCIe))?|(?:RTX|GTX|Quadro|Titan)\s?[A-Z]?\d{2,4}\w*|A\d{4}|"
    r"MI\d{3}X?|NVIDIA|AMD|Ascend|Gaudi\d?|TPU\s?v\d\w*|TPUs?|Apple\s+M\d)\b")
# A language or vision model asked for by name ("which six LLMs ...?", "which base LLM ...?"): only a model's name
# answers (a family, or a name with its size: "Qwen2.5-7B", "Llama 3", "GPT-4o", "ViT-B/16"); "Brier Score",
# "Natural Language Understanding" or a benchmark's name is none.
_COUNT_WORD = re.compile(rf"^{_COUNT}\s+", re.IGNORECASE)
_ASKS_MODEL = re.compile(r"\b(?:llms?|(?:base |backbone |language |foundation |vision(?:-language)? )?models?|"
                         r"backbones?|lms?|vlms?|mllms?|lvlms?|agents?)\b", re.IGNORECASE)
_MODEL_NAME = re.compile(
    r"\b(?:GPT|Llama|LLaMA|Qwen|Mistral|Mixtral|Gemma|Phi|Claude|Gemini|DeepSeek|Vicuna|Falcon|OPT|BLOOM|Pythia|"
    r"T5|Flan|BERT|RoBERTa|DeBERTa|ELECTRA|LLaVA|InternVL|InternLM|Yi|Baichuan|ChatGLM|GLM|Olmo|OLMo|SmolLM|"
    r"CLIP|SigLIP|ViT|DINO(?:v2)?|ResNet|Whisper|wav2vec|HuBERT|Stable\s+Diffusion|SDXL)[\w.-]*"
    r"|\b[A-Z][\w.-]*-?\d+(?:\.\d+)?[BM]\b")
# The organism a study's data came from, asked for ("Which animal species were the recordings from?", "from mice or
# another species?") and the words that answer: "across many animals" or "primate" names no species. Not "what the
# animal is doing".
_ASKS_SPECIES = re.compile(
    r"\b(?:which|what)\s+(?:(?!(?:the|a|an|this|that|each|its|their)\b)[\w-]+\s+){0,2}?(?:species|animals?|organisms?)\b|"
    r"\bor\s+(?:some\s+|any\s+)?(?:other|another|different)\s+(?:species|animals?|organisms?)\b", re.IGNORECASE)
_SPECIES_NAME = re.compile(
    r"\b(?:mouse|mice|murine|rats?|monkeys?|macaques?|rhesus|marmosets?|humans?|zebrafish|larvae|drosophila|"
    r"fruit\s+fl(?:y|ies)|C\.\s?elegans|songbirds?|zebra\s+finch(?:es)?|ferrets?|cats?|pigs?|dogs?|bats?|"
    r"human\s+(?:participants|subjects|patients|volunteers))\b", re.IGNORECASE)
# A sentence about experiments, where an abstract names what it was evaluated on.
_EXPERIMENTS = re.compile(r"\b(?:evaluat|experiment|benchmark|dataset|test|trained on|outperform|compar|baseline)",
                          re.IGNORECASE)
# Where a list topic's main clause ends: examples, relative clauses, asides ("..., where forward and backward
# passes see stale weights", "(MDPs, policy evaluation)", "such as backdoors").
# (Each phrase stands as a word: "brain-like" is no "like", and "e.g." is followed by a space, not a word boundary.)
_SUBORDINATE = re.compile(
    r"\s*(?:\(|,\s*(?:e\.g\.|for example|such as|i\.e\.|like|including|whether|meaning|where|which|that|and)(?![\w-])|"
    r"(?<![\w-])(?:where|which|whose|such as|e\.g\.|i\.e\.|for example|like|including|whether|either|so that|so)"
    r"(?![\w-])).*$",
    re.IGNORECASE,
)
# Alternatives in a topic ("smoothness or curvature condition"): a paper about it uses one of them, not both.
_ALTERNATIVES = re.compile(r"((?:[\w-]+\s+){0,2}[\w-]+)\s*,?\s+(?:or|and/or)\s+((?:[\w-]+\s+){0,2}[\w-]+)",
                           re.IGNORECASE)
_SPELLED_OUT = re.compile(r"((?:[A-Z][\w-]*\s+){1,5})(\([A-Za-z]{2,8}\))")
# Words that make a name descriptive: "SVM-style losses", "Adam-type optimizers", "ImageNet-size models".
_DESCRIPTIVE_SUFFIX = re.compile(r"-(?:style|like|type|size|sized|scale|based|model|level|class)s?$", re.IGNORECASE)
# What "how many" counts: the words after it, up to the verb.
_COUNTED = re.compile(r"\bhow many ((?:[\w-]+ ){0,3}?)(?:did|does|do|is|are|was|were|can|could|has|have|had|will|"
                      r"would|in|of|on|for|per|used|were|and)\b", re.IGNORECASE)
# A figure in an abstract: digits, or a number word.
# "(1) We leverage ...", "(ii)": the items of a list, not figures.
_ENUMERATOR = re.compile(r"\(\s*(?:\d{1,2}|[ivx]{1,4}|[a-h])\s*\)")
_FIGURE = re.compile(
    r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|forty|fifty|"
    r"hundreds?|thousands?|millions?|billions?|dozens?|twice|half|double|triple|tenfold|several)\b",
    re.IGNORECASE,
)
# A leading clause that says which paper the question is about ("In the emotion circuits study on LLMs, what
# dataset ..."): it picks the paper, not the sentence that answers.
_PAPER_LEAD = re.compile(r"^\s*(?:so,?\s+|and\s+)?(?:in|for|from|regarding|about|on)\s+(?:the\s+)?[^,?]{3,80}?"
                         r"\b(?:paper|study|work|article|abstract)\b[^,?]{0,40},\s*", re.IGNORECASE)
# "I'm", "what's", "don't": the pronoun or verb is no topic word, and neither is the tail ("m", "s", "don").
_CONTRACTION = re.compile(r"\b(\w+)(?:'|’)(?:m|s|re|ve|ll|d)\b|\b\w+n(?:'|’)t\b", re.IGNORECASE)
_WORD_TOKEN = re.compile(r"[A-Za-z0-9][\w-]*[A-Za-z0-9]|[A-Za-z]")


@dataclass(frozen=True)
class ExtractiveParams:
    sentences_single: int = 3
    # A list question's candidates are the hits it is given (``PipelineConfig.multi_candidates`` deep); the search for
    # their topic alone, which ranks them, looks this deep.
    topic_search_depth: int = 40
    membership: MembershipParams = MembershipParams()
    named_focus_coverage: float = 0.35  # share of them the abstract of a paper the question names must mention
    # A list's key terms (``key_terms``): words of the topic at least this rare (BM25 idf over the chunks: on the
    # bundled corpus, words that at most two chunks use). On the dev sets' 55 list questions, 3.5 drops one wrong
    # paper and no right one; 3.0 drops a right one; 4.0 changes nothing (bench/results/tuning.md).
    key_term_idf: float = 3.5
    # ... and of what "X for Y" applies, words at least this rare (on the bundled corpus "reinforc" 2.47, "graph"
    # 2.37; "llm" 1.80, "model" 0.45 are too common to tell a paper apart).
    head_term_idf: float = 2.0
    # "How many X ...?" is answered by a figure within this many words of X ("28 tabular datasets", "reducing
    # communication rounds by over 30%"), not by any figure in a sentence that mentions X.
    counted_window: int = 4
    lexical_weight: float = 0.5
    # Where the code is answers only a question about the code: quoted after anything else ("Our code is
    # available at URL" was the third of MA-RAG's three sentences on what it was evaluated on).
    boilerplate_penalty: float = 1.0
    background_penalty: float = 0.15


@dataclass
class PaperEvidence:
    """A paper that answers (``index`` into the hits) and its evidence sentences, in the abstract's order."""

    index: int
    sentences: list[str] = field(default_factory=list)


@dataclass
class AnswerPlan:
    """What the retrieved papers can answer: ``kind`` is ``answer``, ``not_stated`` or ``not_covered``."""

    kind: str
    papers: list[PaperEvidence] = field(default_factory=list)
    multi: bool = False
    missing: str = ""  # for not_stated: what the abstract does not mention or quantify
    count: bool = False  # "how many papers ...": the answer says how many qualify
    closest: float = 0.0  # a list's papers: the cosine of the sentence (or title) closest to its topic
    covered: float = 0.0  # a list's likeliest paper: the share of the topic's words its abstract uses
    named: bool = False  # a list's topic gives a name (a benchmark, a model) that its papers' abstracts mention

    @property
    def refused(self) -> bool:
        return self.kind != "answer"


def is_multi_paper_question(question: str) -> bool:
    return bool(_MULTI.search(question) or _ASKS_FOR_ANY.search(question)) or counts_papers(question)


def counts_papers(question: str) -> bool:
    """"How many papers are about X?" asks for the papers of the collection, not a figure in an abstract."""
    return bool(_COUNT_PAPERS.search(question))


_PART_SPLIT = re.compile(r",?\s+and\s+(?=(?:which|what|how|on|in|where|when|who|whether|roughly)\b)|;\s*",
                         re.IGNORECASE)


def question_parts(question: str) -> list[str]:
    """The whole question first, then its parts when it asks several things at once."""
    parts = [p.strip() for p in _PART_SPLIT.split(question) if p and p.strip()]
    return [question, *parts] if len(parts) > 1 else [question]


def names_paper(question: str, hit: Hit) -> bool:
    """Does the question name the paper (its coined title, e.g. "FedSSM"), not just describe it?"""
    return mentions_title(question, hit.title)


def without_title(text: str, title: str) -> str:
    """``text`` with the paper's short title taken out, however it is typed ("Fed SSM" for FedSSM)."""
    if not title.strip() or len(title.split()) > 2:
        return text
    return re.sub(name_regex(title), " ", text, flags=re.IGNORECASE)


def _title_position(text: str, title: str) -> int:
    """Where ``text`` first names a short title (the order a comparison names its papers in)."""
    match = re.search(name_regex(title), text, re.IGNORECASE)
    return match.start() if match else len(text)


def mentions_title(text: str, title: str) -> bool:
    """Does ``text`` use a short title (one or two words, e.g. "FedSSM") as a whole word, in any case?"""
    title = title.strip()
    if not title or len(title.split()) > 2:
        return False
    return re.search(name_regex(title), text, re.IGNORECASE) is not None


class ExtractiveAnswerer:
    label = "extractive (no LLM)"

    def __init__(
        self,
        embedder: Embedder,
        params: ExtractiveParams | None = None,
        idf: Callable[[str], float] | None = None,
        search: Callable[[str, int], list[Hit]] | None = None,
    ) -> None:
        self.embedder = embedder
        self.params = params or ExtractiveParams()
        # Ranks the papers for a list question's topic alone (its framing left out); without it, the question's
        # own ranking stands in.
        self.search = search
        self.analyze = Analyzer(LexicalParams())
        self.idf = idf or (lambda _term: 1.0)
        self.question_words = frozenset(self.analyze.plain(_QUESTION_WORDS))
        self.asking_words = frozenset(self.analyze.plain(_ASKS_WHAT_IT_DOES))
        self.comparison_words = frozenset(self.analyze.plain(_COMPARED_WITH))

    def plan(self, question: str, hits: Sequence[Hit], *, pointed: bool = False) -> AnswerPlan:
        """Which papers answer ``question`` and with which sentences, or why none does (see the module docstring).

        ``pointed``: the question points at ``hits[0]`` without naming it (a follow-up's "its", "the second one"),
        so it is asked of that paper as if it named it."""
        if not hits:
            return AnswerPlan("not_covered")
        count = counts_papers(question)
        # "What does PoLar evaluate on, and which prior approaches does it beat?" asks about PoLar, not for a list.
        multi = is_multi_paper_question(question) and (count or not any(names_paper(question, h) for h in hits))
        named_papers = [] if multi else sorted((i for i, h in enumerate(hits) if names_paper(question, h)),
                                               key=lambda i: _title_position(question, hits[i].title))
        if len(named_papers) > 1:
            # "Compare FedSSM and Fed-Kalter", "How does X differ from Y?": each named paper in its own words
            # (neither abstract mentions the other, which is no reason to decline).
            chosen, closest, covered, named, multi = named_papers, 0.0, 0.0, False, True
        elif not multi:
            # A question that names one paper is about it, wherever the search ranked it ("cog router results":
            # R2-Router's "routers" outscore CogRouter's name typed apart); else about the top one.
            chosen, closest, covered, named = named_papers or [0], 0.0, 0.0, False
        else:
            chosen, closest, covered, named = self._choose_papers(question, hits, multi)
        if not chosen:
            return AnswerPlan("not_covered", multi=multi)
        # "Which papers ..., and how much does it help?" with one paper that qualifies is a question about it.
        multi = multi and (len(chosen) > 1 or count)
        question_terms = set(self.analyze(question))
        # A list gives each paper one sentence, or one for each part of "which papers use X, and how much ...?";
        # a comparison two.
        per_paper = max(2 if len(named_papers) > 1 else 1, len(question_parts(question)) - 1)
        artifact = built_artifact(self.list_topic(question)) if multi else None
        # "Which environments do AdaMEM and CogRouter both use?": what the named papers' abstracts all name.
        shared = shared_names([hits[i] for i in named_papers]) if (
            len(named_papers) > 1 and _ASKS_COMMON.search(question)) else []
        papers = [PaperEvidence(i, [sentence] if artifact and (sentence := _building_sentence(hits[i], artifact))
                                else self._best_sentences(question, question_terms, hits[i],
                                                          per_paper if multi else self.params.sentences_single,
                                                          prefer=shared))
                  for i in chosen]
        papers = [p for p in papers if p.sentences]
        if not papers:
            return AnswerPlan("not_covered", multi=multi)
        if not multi and not is_multi_paper_question(question):
            missing = self.unstated(question, hits[papers[0].index], pointed=pointed)
            if missing:
                return AnswerPlan("not_stated", papers[:1], multi=False, missing=missing)
        return AnswerPlan("answer", papers, multi=multi, count=count, closest=closest, covered=covered, named=named)

    def write(self, plan: AnswerPlan, hits: Sequence[Hit]) -> str:
        """The plan's evidence as a cited answer: one line a paper for several papers, else the sentences."""
        # Quoted as a reader reads them: the abstracts' LaTeX and Markdown markup left out.
        if plan.multi:
            # One sentence a paper, or one for each part of "Which papers use X, and how much does it help?".
            # (each sentence cited, as the claim check cites it: the text checked is the text shown)
            lines = [f"- {hits[p.index].title}: {' '.join(f'{readable(s)} [{p.index + 1}]' for s in p.sentences)}"
                     for p in plan.papers]
            if plan.count:
                n = len(plan.papers)
                lines.insert(0, f"{n} paper{'s' if n != 1 else ''} {'are' if n != 1 else 'is'} about this:")
            return "\n".join(lines)
        paper = plan.papers[0]
        return " ".join(f"{readable(s)} [{paper.index + 1}]" for s in paper.sentences)

    # --- does the abstract state what is asked? ---------------------------------------------------------

    def unstated(self, question: str, hit: Hit, *, pointed: bool = False) -> str:
        """What the question asks of ``hit`` that its abstract does not state ("" when nothing is missing).

        Two checks, both about the question's form rather than its topic: every name the question gives
        (a benchmark, a model, a baseline) must occur in the abstract; a question asking for a figure
        needs a sentence with a figure that is about what is asked.
        """
        asks_figure = asks_for_figure(question)
        asked_name = asks_for_name(question)
        if not asks_figure and not asked_name and not pointed and not names_paper(question, hit):
            return ""  # a question that describes a paper in its own words asks for no particular detail
        abstract = hit.abstract or hit.text
        absent = [name for name in question_names(without_title(question, hit.title)) if not mentions(hit, name)]
        if absent:
            return "never mentions " + _join(absent)
        if asked_name and not names_other_than(hit, question, kind=asks_outright_for_names(question),
                                               asked_for=asked_name):
            return f"names no {_COUNT_WORD.sub('', asked_name)}"  # "which six LLMs?": it names no LLMs
        # "What is the main limitation of Caracal?": the problem an abstract starts from is earlier work's, not
        # its own; only a sentence that says what it does not do or where it falls short answers.
        if (_ASKS_OWN_LIMITATION.search(question) and not _OF_OTHERS.search(question)
                and not any(_SAYS_OWN_LIMITATION.search(sentence) and (_OWN.search(sentence) or hit.title in sentence)
                            for sentence in (abstract[a:b] for a, b in split_sentences(abstract)))):
            return "says nothing of its own limitations"
        named = names_paper(question, hit)
        kind = asked_figure_kind(question)
        # "How much better is X than the baselines?": what it is compared with is the abstract's to name.
        asking = self.asking_words | (self.comparison_words if kind and kind[0] == "improvement" else frozenset())
        named_coverage = self.coverage(question, hit, known_only=True, ignore=asking) if named else 1.0
        if named_coverage < self.params.named_focus_coverage:
            # A question that names the paper asks about its details: most of its other words must be there.
            present = set(self.analyze(abstract))
            missing = sorted((t for t in self.focus_terms(question, hit) - asking
                              if not _present(t, present, self.analyze) and not _same_word(t, present)
                              and len(t) > 2 and self.corpus_uses(t)),
                             key=lambda t: (-self.idf(t), t))  # ties in a fixed order
            # Only what can be named counts: "tl;dr of FedSSM" lacks no word the corpus knows.
            if missing:
                return "never mentions " + _join(_phrases(question, _surface(question, missing[:3], self.analyze)))
        if not asks_figure:
            return ""
        # Sentences with a figure ("(1) We ..." enumerates, "GPT-4o" names: neither is a figure).
        figured = [(abstract[a:b], plain) for a, b in split_sentences(abstract)
                   if _FIGURE.search(plain := _without_names(_ENUMERATOR.sub(" ", abstract[a:b])))]
        if kind is not None:
            return "" if any(kind[1].search(sentence) for sentence, _ in figured) else (
                f"gives no figure for the {kind[0]}")
        # "How many X and how many Y ...?": a figure for each, each near what it counts.
        counted = [(what, terms) for m in _COUNTED.finditer(question)
                   if (terms := set(self.analyze(what := m.group(1).strip())))]
        if counted:
            for what, terms in counted:
                if not any(self._counts(plain, terms) for _, plain in figured):
                    return f"gives no figure for {what}"
            return ""
        focus = self.focus_terms(question, hit)
        if any(not focus or focus & set(self.analyze(sentence)) for sentence, _ in figured):
            return ""
        nouns = list(dict.fromkeys(m.group("noun").lower() for m in _figure_asked(question) if m.group("noun")))
        return f"gives no figure for the {_join(nouns)}" if nouns else "gives no figure for what is asked"

    def _counts(self, sentence: str, target: set[str]) -> bool:
        """Does ``sentence`` give a figure for what is counted ("28 tabular datasets", "communication rounds by
        over 30%")? The figure must stand within a few words of a word of ``target``: "selecting the one with high
        quality" counts no LLMs."""
        words = sentence.split()
        figures = [i for i, w in enumerate(words) if _FIGURE.search(w)]
        near = self.params.counted_window
        return any(set(self.analyze(" ".join(words[max(0, i - near): i + near + 1]))) & target for i in figures)

    def _choose_papers(self, question: str, hits: Sequence[Hit],
                       multi: bool) -> tuple[list[int], float, float, bool]:
        """The papers that answer (indexes into ``hits``), and for a list the similarity of its sentence closest
        to the topic, the likeliest paper's share of the topic's words and whether the topic names something they
        mention (``AnswerPlan.closest``, ``covered``, ``named``):
        the top one for a single-paper question; for "which
        papers ...", every candidate whose chance of being about the question's topic reaches the threshold
        (rag/answers/membership.py), most likely first, or else the most likely one. A name the topic gives
        ("... evaluate on ALFWorld") must be in the abstract: no paper qualifies for it by meaning alone."""
        if not multi:
            return [0], 0.0, 0.0, False
        params = self.params.membership
        topic = self.list_topic(question)
        features = self.topic_features(topic, hits)  # as deep as the caller searched
        chance = chances(features, params)
        names = question_names(topic)
        # A name an abstract sets itself apart from ("Unlike models ... (e.g., Mamba), Caracal uses ...") is no name
        # it uses, unless what is asked is what abstracts mention.
        # A name typed alone ("Mamba") asks what mentions it.
        said = hits if _ABOUT_MENTIONS.search(topic) or _ONE_NAME.match(topic) else [_as_said(topic, h) for h in hits]
        mentioned = [any(mentions(h, n) for n in names) for h in said] if names else []
        required = required_names(topic)
        if required:  # "... evaluate on ALFWorld": no paper qualifies for a name by meaning alone
            chance = np.where([any(mentions(h, n) for n in required) for h in said], chance, 0.0)
        coverage = features[:, FEATURES.index("topic_coverage")]
        # "Which papers mention GRPO?", "... use LoRA?": the name is the whole topic, so every paper that mentions
        # it qualifies, however little else of it sounds like the question, and none when no paper does.
        artifact = built_artifact(topic)
        if required and names_alone(topic, required):
            chosen = sorted((i for i, c in enumerate(chance) if c > 0), key=lambda i: -chance[i])
            if not chosen:
                return [], 0.0, 0.0, False
        elif artifact and (makers := [i for i, h in enumerate(said) if _builds(h, artifact)]):
            # "Which papers propose a new benchmark?": those that build one, not every paper evaluated on one.
            chosen = sorted(makers, key=lambda i: -chance[i])
        else:
            chosen = self._with_key_terms(topic, hits, listed(chance, coverage, params))
        closest = float(max(features[i, FEATURES.index("closest_sentence")] for i in chosen))
        return chosen, closest, float(coverage[chosen[0]]), bool(names) and mentioned[chosen[0]]

    def key_terms(self, topic: str, hit: Hit) -> set[str]:
        """The topic's rare words that ``hit`` (the likeliest paper) uses: words of its main clause ("state-space"
        of "use state-space models to pick clients in federated learning") that few abstracts use (idf at least
        ``key_term_idf``). Not the words of examples, of what follows "where/which/such as", or of alternatives
        ("curvature" of "smoothness or curvature"): a paper about the topic need not use those."""
        head = _SUBORDINATE.sub("", topic)
        alternatives = {t for m in _ALTERNATIVES.finditer(head) for t in self.analyze(f"{m.group(1)} {m.group(2)}")}
        unknown = self.idf("\x00never-a-term\x00")
        present = set(self.analyze(hit.abstract or hit.text))
        return {t for t in self.focus_terms(head, hit) - alternatives
                if self.params.key_term_idf <= self.idf(t) < unknown and _present(t, present, self.analyze)}

    def _with_key_terms(self, topic: str, hits: Sequence[Hit], chosen: list[int]) -> list[int]:
        """``chosen`` without the papers that lack a key term of the topic (``key_terms`` of the likeliest): a
        federated-learning paper that uses no state-space model is not listed beside FedSSM for "which papers use
        state-space models to pick clients in federated learning?"."""
        if len(chosen) < 2:
            return chosen
        key = self.key_terms(topic, hits[chosen[0]]) | self._head_terms(topic, hits[chosen[0]])
        # A method named in words is used under its name, not by one of its words: "structure-reinforced" is no
        # reinforcement learning (RGVQ was listed for "train VLMs with reinforcement learning"), "neural manifold"
        # in "trained networks" no graph neural network.
        phrase = self._method_words(topic)
        if phrase and not self._says_phrase(hits[chosen[0]], phrase):
            phrase = []
        if not key and not phrase:
            return chosen
        return [chosen[0], *(i for i in chosen[1:] if self.uses_all(hits[i], key)
                             and (not phrase or self._says_phrase(hits[i], phrase)))]

    @staticmethod
    def _method(topic: str) -> str | None:
        """What "X for Y" applies (X) or "X with/using/via Y" uses (Y), or None when the topic names no method."""
        head = _FOR.split(topic, maxsplit=1)[0]
        # "train VLMs with reinforcement learning": what follows "with/using/via" is the method asked.
        method = _WITH.split(_SUBORDINATE.sub("", head), maxsplit=1)[1:]
        head = method[0].split(",")[0] if method else head
        return None if head == topic and not method else head

    def _method_words(self, topic: str) -> list[str]:
        """The method's words as a phrase ("reinforcement learning"), when it is one of two or three words; a topic
        that names no method ("use state-space models", "graph neural networks") is the phrase itself. The verbs
        and words that ask in front of it are left out ("use", "study"), a noun that ends it is not ("models")."""
        method = self._method(topic) or topic
        words = [w for w in _WORD_TOKEN.findall(method) if self.analyze(w)]
        while words and (set(self.analyze(words[0])) <= self.question_words or words[0].lower() in _TOPIC_VERBS):
            words.pop(0)
        if any(w.lower() in ("or", "and", "nor") for w in words) or "," in method:
            return []  # alternatives: a paper says one of them
        return words if 2 <= len(words) <= 3 else []

    def _says_phrase(self, hit: Hit, words: list[str]) -> bool:
        """Does the abstract say the phrase (its words in a row, as analysed; "state space" as "state-space") or
        its acronym ("RL", "SSM" of "state-space models")?"""
        abstract = hit.abstract or hit.text
        terms = [t for w in words for t in self.analyze(w) if "-" not in t]
        said = [t for t in self.analyze(abstract) if "-" not in t]
        if any(_in_a_row(said, i, terms) for i, t in enumerate(said) if t == terms[0]):
            return True
        acronym = "".join(part[0] for w in words for part in w.split("-") if part).upper()
        return bool(re.search(rf"\b{re.escape(acronym)}s?\b", abstract))

    def _head_terms(self, topic: str, hit: Hit) -> set[str]:
        """The telling words of what "X for Y" applies, where the likeliest paper uses them ("reinforc" of
        "reinforcement learning for LLM reasoning": PoLar and R2-Router, about LLM reasoning without RL, were
        listed). Less rare than key terms (idf at least ``head_term_idf``): the method is what is asked."""
        head = self._method(topic)
        if head is None:
            return set()
        present = set(self.analyze(hit.abstract or hit.text))
        return {t for t in self.focus_terms(head, hit)
                if self.idf(t) >= self.params.head_term_idf and _present(t, present, self.analyze)}

    def unused_words(self, text: str) -> list[str]:
        """The words of ``text`` that no abstract uses, as written ("watermarking" of "watermarking LLM-generated
        text"); not the words that ask, and not a compound whose parts abstracts use ("LLM-generated")."""
        out: list[str] = []
        text = _CONTRACTION.sub(lambda m: "" if m.group(0).lower().endswith("n't") else m.group(1), text)
        for word in dict.fromkeys(_WORD_TOKEN.findall(text)):
            if len(word) < 2:
                continue  # "I", a letter: no topic
            terms = [t for t in self.analyze(word) if t not in self.question_words and t not in self.asking_words]
            if not terms or any(self.corpus_uses(t) for t in terms if "-" in t):
                continue
            if not all(self.corpus_uses(t) for t in terms if "-" not in t):
                out.append(word)
        return out

    def absent_application(self, topic: str) -> list[str]:
        """The words of what "X for Y" applies X to (Y: "molecules" of "graph neural networks for molecules, e.g.
        drug discovery") when no abstract uses any of them: then no paper is about the topic, however many are
        about X. [] when the topic applies nothing or the corpus knows a word of Y."""
        parts = _FOR.split(_SUBORDINATE.sub("", topic), maxsplit=1)
        if len(parts) < 2:
            return []
        target = parts[1]
        words = [w for w in _WORD_TOKEN.findall(target)
                 if [t for t in self.analyze(w) if t not in self.question_words and t not in self.asking_words]]
        unused = self.unused_words(target)
        return unused if words and len(unused) == len(words) else []

    def corpus_uses(self, term: str) -> bool:
        """Does any abstract use this analysed term, or its plural ("gpu" of "GPUs")?"""
        unknown = self.idf("\x00never-a-term\x00")
        return min(self.idf(term), self.idf(term + "s")) < unknown

    def uses_all(self, hit: Hit, terms: set[str]) -> bool:
        """Does the abstract use every one of these analysed ``terms`` (hyphenated ones by their parts too)?"""
        present = set(self.analyze(hit.abstract or hit.text))
        return all(_present(t, present, self.analyze) for t in terms)

    @staticmethod
    def list_topic(question: str) -> str:
        """What a list question asks papers about ("Which papers use X, and how much does it help?" -> "use X")."""
        part = next((p for p in question_parts(question)[1:] if is_multi_paper_question(p)), question)
        return list_topic(part)

    def membership_features(self, question: str, hits: Sequence[Hit]) -> np.ndarray:
        """The membership model's ``FEATURES`` for each of ``hits`` as candidates for a list question (its whole
        topic: what ``bench/fit_membership.py`` fits on)."""
        return self.topic_features(self.list_topic(question), hits)

    def topic_features(self, topic: str, hits: Sequence[Hit]) -> np.ndarray:
        topic_hits = self.search(topic, self.params.topic_search_depth) if self.search is not None else hits
        # What an abstract says it does without ("without ... reinforcement learning") is no part of its topic,
        # unless the topic is itself about doing without something ("estimate gradients without backpropagation").
        def coverage(text: str, hit: Hit) -> float:
            return self.coverage(text, _as_said(topic, hit))

        return membership_features(topic, hits, topic_hits, coverage, self.embedder.embed)

    def focus_terms(self, question: str, hit: Hit) -> set[str]:
        name_terms = set(self.analyze(hit.title)) if len(hit.title.split()) <= 2 else set()
        question = without_title(question, hit.title)  # "what is Fed SSM?": neither "fed" nor "ssm" is a detail
        return {t for t in self.analyze(question) if t not in self.question_words and t not in name_terms}

    def coverage(self, question: str, hit: Hit, *, known_only: bool = False,
                 ignore: frozenset[str] = frozenset()) -> float:
        """Share of the question's topic words (not its question words, not the paper's name) in the abstract.

        A hyphenated word counts as present when its parts are ("state-space" in "state space models").
        ``known_only``: only words the corpus uses somewhere (a word no abstract uses tells nothing of this one);
        ``ignore``: words that ask rather than say what about (``asking_words``)."""
        focus = self.focus_terms(question, hit) - ignore
        if known_only:
            focus = {t for t in focus if self.corpus_uses(t)}
        if not focus:
            return 1.0
        present = set(self.analyze(hit.abstract))
        weights = {t: self.idf(t) for t in focus}
        return sum(w for t, w in weights.items() if _present(t, present, self.analyze)) / max(sum(weights.values()),
                                                                                           1e-9)

    def _best_sentences(self, question: str, question_terms: set[str], hit: Hit, n: int,
                        prefer: Sequence[str] = ()) -> list[str]:
        """The ``n`` sentences of ``hit`` that answer best (see the comments below); one that mentions a name of
        ``prefer`` is among them and leads."""
        text = hit.abstract or hit.text
        spans = split_sentences(text)
        if not spans:
            return []
        sentences = [text[a:b] for a, b in spans]
        parts = [_PAPER_LEAD.sub("", part, count=1) or part
                 for part in (question_parts(question) if n > 1 else [question])]
        vectors = self.embedder.embed([*parts, *sentences])
        sentence_terms = [set(self.analyze(s)) for s in sentences]
        # The paper's own name picks the paper, not the sentence: its opening names it, the answer may not.
        name_terms = set(self.analyze(hit.title)) if len(hit.title.split()) <= 2 else set()
        penalties = sentence_penalties(question, sentences, links=self.params.boilerplate_penalty,
                                           background=self.params.background_penalty)
        chosen: list[int] = []
        # One best sentence per part of a compound question ("which X ..., and how many Y ..."), then the rest.
        part_scores = []
        for index, part in enumerate(parts):
            terms = set(self.analyze(part)) - name_terms
            overlap = np.array([len(terms & st) / max(len(terms), 1) for st in sentence_terms])
            part_scores.append(vectors[len(parts):] @ vectors[index] + self.params.lexical_weight * overlap
                               - penalties)
        for scores in part_scores[1:] if len(parts) > 1 else []:
            best = int(np.argmax(scores))
            if best not in chosen:
                chosen.append(best)
        answers_parts = list(chosen)  # in the order the question asks them
        overall = np.max(np.vstack(part_scores), axis=0)
        for i in np.argsort(-overall).tolist():
            if len(chosen) >= n:
                break
            if i not in chosen:
                chosen.append(i)
        chosen = chosen[:max(n, len(parts) - 1)]
        mentioning = [i for i in np.argsort(-overall).tolist() if any(_says(sentences[i], p) for p in prefer)]
        if mentioning and not set(mentioning) & set(chosen):
            chosen[-1] = mentioning[0]
        # The sentence that says what is asked leads, the others follow in the abstract's order (which reads as it
        # was written): asked what a paper found ("What did MA-RAG evaluate on?"), its finding, not the opening
        # that introduces the paper; asked about a name ("Mamba", "... on MedQA?"), the sentence that gives it.
        # (Names only where papers are asked for by them, "Mamba", "Which papers use GRPO?": in a question about
        # one paper they mostly say which paper it is, "What timing error does the ECG-to-PCG model achieve?".)
        names = list(prefer) or ([n for n in question_names(question) if n.lower() not in hit.title.lower()] if (
            is_multi_paper_question(question)) else [])
        figures = precise_figures(question)
        # (What gives the name or figure asked leads even where it leans on the sentence before: it is the answer.)
        named = [i for i in chosen if any(_says(sentences[i], n) for n in names)
                 or any(states_figure(sentences[i], f) for f in figures)]
        findings = [i for i in (named or chosen) if can_lead_with_finding(sentences[i])] if (
            asks_for_findings(question)) else []
        first = [max(leads, key=lambda i: overall[i])] if (leads := findings or named) else []
        if len(parts) > 1:
            # "What dataset did they build, and how accurate is it?": each part's answer in the order asked.
            first = list(dict.fromkeys([*answers_parts, *first]))
        return [*(sentences[i] for i in first), *(sentences[i] for i in sorted(chosen) if i not in first)]


# --- names in questions -----------------------------------------------------------------------------------------


_EXISTENCE = re.compile(r"\b(?:is there|are there|has anyone|have any|any (?:work|papers?|research|method))\b",
                        re.IGNORECASE)


def asks_for_figure(question: str) -> bool:
    """Does the question (or one of its parts) ask for a figure near its start ("how many ...", "what accuracy ...")?

    "Is there a method that decides how many ..." asks whether something exists, not for a figure."""
    return bool(_figure_asked(question))


def _figure_asked(question: str) -> list[re.Match[str]]:
    """Where the question asks for a figure: near the start of one of its parts, or of a clause after a comma or a
    sentence that sets it up ("In the mixed-precision VMC paper, what speed-up ...?", "AMDP keeps GPUs busy. How
    much faster is it?")."""
    if _EXISTENCE.search(question) or counts_papers(question):
        return []
    found = []
    for part in question_parts(question):
        for clause in _clauses(part):
            match = _ASKS_FIGURE.search(clause)
            if match and len(clause[: match.start()].split()) <= 6:
                found.append(match)
                break
    if not found and not _ASKS_ANYTHING_ELSE.search(question) and (terse := _TERSE_FIGURE.search(question)):
        found.append(terse)
    return found


def asked_figure_kind(question: str) -> tuple[str, re.Pattern[str]] | None:
    """What kind of figure "what ... <kind>" asks for ("speed-up" of "what wall-clock speed-up ...?") and the
    pattern a sentence giving one matches; None for "how many ..." and figures of no known kind."""
    for match in _figure_asked(question):
        for asked, evidence in _FIGURE_KINDS:
            if found := asked.search(match.group(0)):
                return found.group(0).lower(), evidence
        if _ASKS_IMPROVEMENT.match(match.string, match.start()):
            return "improvement", _IMPROVEMENT
    return None


def asks_for_name(question: str) -> str:
    """What a question asks the name of ("base LLM" of "Which base LLM did they use?", "benchmarks" of "What are
    the names of the benchmarks ...?", "species" of "which animals were recorded?"), or ""."""
    if _ASKS_SPECIES.search(question):
        return "species"
    for part in question_parts(question):
        for clause in _clauses(part):
            if match := _ASKS_NAME.match(clause):
                return " ".join(match.group(0).split()[1:])
        if asked := asks_outright_for_names(part):
            return asked
    return ""


def _clauses(part: str) -> list[str]:
    """A question part, then what follows each comma or sentence end in it ("MA-RAG reports +6.8 points. Which
    backbone was it?", "On MADQA, which specific model ...?"): where a question may start."""
    return [part, *(part[m.end():] for m in re.finditer(r",\s+|(?<=[.?!])\s+|\s+[—–-]{1,2}\s+|:\s+", part))]


def asks_outright_for_names(question: str) -> str:
    """What "What are the names of the benchmarks ...?", "Name the datasets ...", "Which four benchmarks ...?",
    "... five benchmarks: which ones are they?" or "Which models were evaluated on X?" asks for ("benchmarks"), or
    ""."""
    if match := _ASKS_NAMES_OF.search(question) or _WHICH_ONES.search(question):
        return match.group(1).lower()
    for part in question_parts(question):
        for clause in _clauses(part):
            if match := _ASKS_WHICH_EXACTLY.match(clause) or _WHICH_WERE_RUN.match(clause):
                return match.group("kind").lower()
    return ""


def names_other_than(hit: Hit, question: str, *, kind: str = "", asked_for: str = "") -> bool:
    """Does the abstract name something (a model, a dataset: a coined name, an acronym, a capitalised word) other
    than the paper itself and what the question names? With ``kind`` ("benchmarks"), only in a sentence about
    that kind or about experiments: "a Dirichlet distribution" in the method's sentence names no benchmark. Asked
    for hardware (``asked_for`` "GPU"), only a chip's name answers ("H100", "TPU v4"): "SimGrid" is no GPU."""
    abstract = re.sub(r"https?://\S+", " ", hit.abstract or hit.text)
    # A spelled-out acronym names a field, not a thing: "Large Language Models (LLMs)" is no model's name, nor
    # "Multimodal Federated Learning (MMFL)".
    abstract = _SPELLED_OUT.sub(" ", abstract)
    known = {n.lower().rstrip("s") for n in question_names(question)}
    known |= {w.lower().rstrip("s") for w in re.findall(r"[\w-]+", hit.title)}
    kind_word = re.compile(rf"\b{re.escape(kind.rstrip('s'))}", re.IGNORECASE) if kind else None
    if asked_for == "species":
        # The class the question names is no answer: "monkey" of "which monkey species" asks which monkey.
        asked_class = {w.lower().rstrip("s") for w in re.findall(r"([\w-]+)\s+species\b", question, re.IGNORECASE)}
        return any(m.group(0).lower().rstrip("s") not in asked_class for m in _SPECIES_NAME.finditer(abstract))
    hardware = _ASKS_HARDWARE.search(asked_for or "")
    model = not hardware and _ASKS_MODEL.search(asked_for or "")
    for a, b in split_sentences(abstract):
        sentence = abstract[a:b]
        if model:
            if any(m.group(0).lower().rstrip("s") not in known for m in _MODEL_NAME.finditer(sentence)):
                return True
            continue
        names = question_names(sentence)
        if kind_word is not None:
            # What the sentence is about, its names aside: "Classical Test Theory" is no sentence about a test.
            plain = re.sub("|".join(rf"\b{re.escape(n)}\b" for n in names), " ", sentence) if names else sentence
            if not (_EXPERIMENTS.search(plain) or kind_word.search(plain)):
                continue
        if hardware:
            if _HARDWARE_NAME.search(sentence):
                return True
            continue
        if any(name.lower().rstrip("s") not in known for name in names):
            return True
    return False


def question_names(question: str) -> list[str]:
    """The names a question gives: coined names and acronyms (GPT-4o, MMLU, BraTS, KDD) and capitalised words
    inside the sentence (Heisenberg, Llama); not field acronyms (LLM, RL) and not the first word."""
    names: list[str] = []
    for number, match in enumerate(_WORD_TOKEN.finditer(question)):
        token = _DESCRIPTIVE_SUFFIX.sub("", match.group(0))
        if is_generic(token) or len(token) < 2 or token.lower() in _CHAT_ABBREVIATIONS:
            continue
        letters = [ch for ch in token if ch.isalpha()]
        acronym = len(letters) >= 2 and sum(ch.isupper() for ch in letters) >= 2
        capitalised = token[0].isupper() and number > 0 and not _after_sentence_end(question, match.start())
        if looks_coined(token) or acronym or (capitalised and token.lower() not in _QUESTION_OPENERS):
            names.append(token)
    return list(dict.fromkeys(names))


# The verbs and small words around a name that make a topic of it and nothing else ("mention GRPO", "use LoRA",
# "evaluate on ALFWorld", "build on Mamba").
_AROUND_A_NAME = frozenset([
    "mention", "mentions", "mentioned", "mentioning", "use", "uses", "used", "using", "cite", "cites", "cited",
    "citing", "evaluate", "evaluates", "evaluated", "evaluating", "test", "tests", "tested", "testing", "compare",
    "compares", "compared", "comparing", "against", "include", "includes", "included", "employ", "employs",
    "employed", "build", "builds", "built", "apply", "applies", "applied", "adopt", "adopts", "adopted", "rely",
    "relies", "involve", "involves", "discuss", "discusses", "refer", "refers", "name", "names", "named", "report",
    "reports", "reported", "run", "runs", "ran", "on", "upon", "with", "of", "in", "to", "for", "by", "the", "a",
    "an", "its", "their", "about",
    # "release code on GitHub", "share their code via Hugging Face": where a paper's code or data is
    "release", "releases", "released", "share", "shares", "shared", "publish", "publishes", "published", "host",
    "hosts", "hosted", "code", "data", "models", "weights", "their", "our", "via", "at",
])


def names_alone(topic: str, names: Sequence[str]) -> bool:
    """Is the topic its names and the words around them, nothing else ("mention GRPO", "evaluate on ALFWorld")?"""
    rest = topic
    for name in names:
        rest = re.sub(rf"(?<![\w-]){re.escape(name)}(?![\w-])", " ", rest)
    return all(w.lower() in _AROUND_A_NAME for w in re.findall(r"[\w'-]+", rest))


def required_names(topic: str) -> list[str]:
    """The names a list topic asks every listed paper to mention: those of its main clause ("ALFWorld" of
    "evaluate LLM agents on ALFWorld"), not those given as examples ("medical images such as X-rays or CT scans"):
    a paper about the topic need not use them."""
    head = _SUBORDINATE.sub("", topic)
    return question_names(head) or ([head] if _ONE_NAME.match(head) and not is_generic(head) else [])


# A topic that is one capitalised word ("Mamba" typed alone, "Which papers are about Mamba?"): a name, though it
# stands first in the topic, where a capitalised word is no name by itself.
_ONE_NAME = re.compile(r"^[A-Z][\w-]*[A-Za-z0-9]$")


# How people write in a chat box, not names of anything a paper could mention: "ELI5 ConPress", "TL;DR of X".
_CHAT_ABBREVIATIONS = frozenset(["eli5", "tl", "dr", "tldr", "fyi", "btw", "imo", "pls", "plz", "asap"])
_QUESTION_OPENERS = frozenset([
    "i", "i'm", "im", "is", "are", "what", "which", "how", "any", "who", "where", "when", "does", "do", "did", "can",
])


def _after_sentence_end(text: str, start: int) -> bool:
    before = text[:start].rstrip()
    return not before or before[-1] in ".?!:\"'("


def _surface(question: str, terms: Sequence[str], analyze: Callable[[str], list[str]]) -> list[str]:
    """The question's own words for analysed ``terms`` ("evalu" -> "evaluated"), in the order given."""
    words = {}
    for word in re.findall(r"[\w-]+", question):
        for term in analyze(word):
            words.setdefault(term, word)
    return list(dict.fromkeys(words.get(t, t) for t in terms))


def _phrases(question: str, words: Sequence[str]) -> list[str]:
    """``words`` of the question that stand next to each other there joined as it writes them ("learning rate",
    not "rate or learning"); the others as given."""
    tokens = re.findall(r"[\w-]+", question)
    where = {w: tokens.index(w) for w in words if w in tokens}
    if len(where) < 2:
        return list(words)
    out: list[str] = []
    for word in sorted(where, key=where.get):
        if out and where[word] == where[out[-1].split()[-1]] + 1:
            out[-1] = f"{out[-1]} {word}"
        else:
            out.append(word)
    return out + [w for w in words if w not in where]


def _present(term: str, present: set[str], analyze: Callable[[str], list[str]]) -> bool:
    if term in present or term + "s" in present:
        return True
    parts = analyze(term.replace("-", " ")) if "-" in term else []
    return bool(parts) and all(p in present for p in parts)


def _same_word(term: str, present: set[str]) -> bool:
    """Is a form of ``term``'s word among the stems ``present``? The stemmer leaves some forms of one word apart
    ("reduc" of "reduce", "reduct" of "reduction"): a stem that begins the other, both at least five letters long,
    is the same word."""
    if len(term) < _SAME_WORD_MIN or "-" in term:
        return False
    return any(len(p) >= _SAME_WORD_MIN and (p.startswith(term) or term.startswith(p)) for p in present)


_SAME_WORD_MIN = 5


def mentions(hit: Hit, name: str) -> bool:
    """Does the paper's title or abstract mention ``name`` (a benchmark, a model, a method the question gives),
    as written, in the singular ("ALFWorld tasks" of "ALFWorld task"), or spelled out ("GNNs": "graph neural
    networks")?"""
    abstract = hit.abstract or hit.text
    known = _DASHES.sub("-", " ".join(f"{hit.title} {abstract}".split()))
    name = _DASHES.sub("-", name.strip())
    singular = name[:-1] if name[-1:] in "sS" and len(name) > 2 else name
    # As a word (its plural, a hyphenated compound, a version: "Qwen" of "Qwen2.5" too), not inside one: "CT" is
    # not in "predict"; read as a substring, a two-letter name was "mentioned" by nearly every abstract.
    if re.search(rf"(?<!\w){re.escape(singular)}(?:e?s)?(?![^\W\d_])", known, re.IGNORECASE):
        return True
    # Spelled out ("GNNs": "graph neural networks"): for three letters or more; the initials of two adjacent
    # words match a two-letter name ("CT": "classification tasks") in most abstracts by chance.
    letters = singular.lower()
    return len(letters) >= 3 and letters.isalpha() and letters in _initials(abstract)


# A figure precise enough to tell one paper from the others: a decimal, a percentage, a thousands-separated count
# ("99.65%", "2,250", "6.8 points"), not a small whole number ("four benchmarks", "3 stages").
_PRECISE_FIGURE = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)+%?|(?<![\w.])\d+%")


def precise_figures(text: str) -> list[str]:
    """The precise figures ``text`` gives ("99.65%", "2,250")."""
    return _PRECISE_FIGURE.findall(text)


def states_figure(text: str, figure: str) -> bool:
    """Does ``text`` state ``figure`` as written (not as part of a longer number)?"""
    return re.search(rf"(?<![\w.]){re.escape(figure)}(?!\d)", text) is not None


# Verbs a list topic starts with ("build a world model", "propose new optimizers"): what a paper does with the
# method, not part of its name.
_TOPIC_VERBS = frozenset([
    "build", "builds", "building", "develop", "develops", "developing", "propose", "proposes", "proposing", "design",
    "designs", "designing", "introduce", "introduces", "introducing", "present", "presents", "train", "trains",
    "training", "apply", "applies", "applying", "employ", "employs", "employing", "leverage", "leverages",
    "leveraging", "adopt", "adopts", "adopting", "improve", "improves", "improving", "learn", "learns", "learning",
    "use", "uses", "using", "study", "studies", "studying", "analyze", "analyse", "analyzes", "analyses", "explore",
    "explores", "exploring", "investigate", "investigates", "new", "novel",
])


def _in_a_row(said: Sequence[str], start: int, terms: Sequence[str]) -> bool:
    """Do ``terms`` follow one another in ``said`` from ``start``, a word at most between two of them ("federated
    graph learning" says federated learning; "neural graph" does not say graph neural)?"""
    at = start
    for term in terms[1:]:
        nxt = next((j for j in (at + 1, at + 2) if j < len(said) and said[j] == term), None)
        if nxt is None:
            return False
        at = nxt
    return True


# A comparison that asks what the papers share: "both", "in common", "the same".
_ASKS_COMMON = re.compile(r"\b(?:both|in common|common|shared?|same)\b", re.IGNORECASE)


def shared_names(hits: Sequence[Hit]) -> list[str]:
    """The names (benchmarks, models, datasets) every one of ``hits``' abstracts gives, in the first's order; not
    the papers' own names."""
    def names_of(hit: Hit) -> dict[str, str]:
        abstract = hit.abstract or hit.text
        own = {w.lower() for h in hits for w in re.findall(r"[\w-]+", h.title)}
        found = (n for a, b in split_sentences(abstract) for n in question_names(abstract[a:b]))
        return {n.lower(): n for n in found if n.lower() not in own}

    each = [names_of(h) for h in hits]
    return [name for key, name in each[0].items() if all(key in other for other in each[1:])] if each else []


def _says(sentence: str, name: str) -> bool:
    """Does this one sentence mention ``name`` (as ``mentions`` reads an abstract)?"""
    return mentions(Hit(rank=0, paper_id="", title="", score=0.0, source="", ordinal=0, text=sentence), name)


# A hyphen as abstracts write it: LaTeX's "--" ("Metropolis--Hastings"), en and em dashes, Unicode hyphens.
_DASHES = re.compile(r"(?:--+|[\u2010-\u2015\u2212])")


def _initials(text: str) -> set[str]:
    """Acronyms the text spells out: "graph neural network" -> "gnn" (so a question's acronym matches it)."""
    words = [w for w in re.findall(r"[A-Za-z]+", text)]
    out = set()
    for size in range(2, 6):
        for i in range(len(words) - size + 1):
            out.add("".join(w[0] for w in words[i : i + size]).lower())
    return out


# "X for Y": what is applied, and to what (``ExtractiveAnswerer._head_terms``).
_FOR = re.compile(r"\s+for\s+", re.IGNORECASE)
# "X with/using/via Y": Y is the method the papers must use (``ExtractiveAnswerer._head_terms``).
# Not a phrasal verb's "with" ("deal with uncertainty", "work with medical images").
_WITH = re.compile(r"(?<!\bdeal)(?<!\bdeals)(?<!\bdealing)(?<!\bwork)(?<!\bworks)(?<!\bworking)(?<!\bcope)"
                   r"\s+(?:with|using|via)\s+", re.IGNORECASE)
# A list of papers that build something new that others evaluate on ("Which papers propose a new benchmark?",
# "... release a dataset?"): nearly every abstract evaluates on benchmarks, few build one.
_ARTIFACT = r"benchmarks?|datasets?|corpus|corpora|test\s?beds?|leaderboards?|suites?"
_NEW_ARTIFACT = re.compile(
    r"\b(?:new|novel|introduc\w*|propos\w*|releas\w*|construct\w*|build\w*|buil[dt]|creat\w*|curat\w*|collect\w*)"
    rf"\s+(?:[\w-]+\s+){{0,2}}?(?P<artifact>{_ARTIFACT})\b", re.IGNORECASE)


def built_artifact(topic: str) -> str | None:
    """What kind of thing a list topic asks the papers to build ("propose a new benchmark" -> "benchmark"), if any."""
    match = _NEW_ARTIFACT.search(topic)
    return match.group("artifact") if match else None


@cache  # compiled once per kind asked, not once for each abstract a scan reads
def _building(artifact: str) -> re.Pattern[str]:
    # Asked for a benchmark, a dataset built to study something else is none ("We first construct a controlled
    # dataset ... to elicit comparable internal states"); asked for a dataset or a corpus, a benchmark's data is one.
    asked = artifact.lower()
    kinds = (r"benchmarks?|test\s?beds?|leaderboards?|suites?" if asked.startswith(("bench", "test", "leader", "suite"))
             else r"datasets?|corpus|corpora|benchmarks?")
    bench = r"|\w[\w-]*Bench\b" if asked.startswith("bench") else ""  # "PRM-BiasBench", "R2-Bench" name one
    return re.compile(
        r"\b(?:we|this\s+(?:paper|work))\s+(?:also\s+|further\s+)?"
        r"(?:introduc|propos|present|releas|construct|build|buil[dt]|creat|curat|collect|contribut)\w*\s+"
        rf"[^.;]{{0,80}}?(?:\b(?:{kinds})\b{bench})|\b(?:new|novel|first)\s+(?:[\w-]+\s+){{0,3}}(?:{kinds})\b",
        re.IGNORECASE)


def says_it_builds(abstract: str, artifact: str) -> bool:
    """Does the abstract say it builds an ``artifact`` ("We introduce MADQA, a benchmark of 2,250 questions", "we
    construct R2-Bench, the first routing dataset", "a new large-scale benchmark", "We release PRM-BiasBench")?"""
    return bool(_building(artifact).search(abstract))


def _builds(hit: Hit, artifact: str) -> bool:
    return says_it_builds(hit.abstract or hit.text, artifact)


def _building_sentence(hit: Hit, artifact: str) -> str | None:
    """The abstract's sentence that says it builds the ``artifact`` (what a list of papers that build one quotes:
    R2-Router was listed with "This work opens a new direction ..." beside "we construct R2-Bench ...")."""
    abstract = hit.abstract or hit.text
    pattern = _building(artifact)
    return next((abstract[a:b] for a, b in split_sentences(abstract) if pattern.search(abstract[a:b])), None)


# "without external teachers, manual pruning, or reinforcement learning", "rather than RL", "instead of
# distillation": what follows, to the end of the clause, is what a paper does not do.
_NEGATED = re.compile(r"\b(?:without|rather\s+than|instead\s+of|no\s+need\s+for|free\s+of)\s+[^.;:()]{1,100}|"
                      # "Unlike models relying on X (e.g., Mamba), Caracal uses ...": to the clause's comma
                      r"\bunlike\s+(?:[^.;:(),]|\([^()]*\)){1,150},", re.IGNORECASE)
# A topic about what abstracts mention, not what they do: "unlike GRPO, we ..." mentions GRPO.
_ABOUT_MENTIONS = re.compile(r"\b(?:mention\w*|cite[sd]?|citing|discuss\w*|compar\w*|contrast\w*)\b", re.IGNORECASE)


def _as_said(topic: str, hit: Hit) -> Hit:
    """``hit`` as it bears on ``topic``: without what it does without, unless the topic is itself about doing
    without something ("estimate gradients without backpropagation")."""
    return hit if _NEGATED.search(topic) else _without_negated(hit)


def _without_negated(hit: Hit) -> Hit:
    abstract = hit.abstract or hit.text
    cleaned = _NEGATED.sub(" ", abstract)
    return hit if cleaned == abstract else replace(hit, abstract=cleaned, text=cleaned)


def _without_names(sentence: str) -> str:
    """The sentence without tokens whose digits are part of a name (GPT-4o, Qwen2.5, L2)."""
    # A name in brackets or quotes is still a name: "(T$^2$PO)", "(GPT-4o)".
    return " ".join(t for t in sentence.split()
                    if not (t.lstrip("([{\"'")[:1].isalpha() and any(c.isdigit() for c in t)))


def _join(items: Sequence[str]) -> str:
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]
