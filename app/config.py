"""The one settings object, read from TRACELORE_* environment variables at the edge."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

PACKAGE_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SIGNATURES = PACKAGE_ROOT / "signatures"


class Settings(BaseSettings):
    """Service and CLI settings. Every field is documented in README.md."""

    model_config = SettingsConfigDict(env_prefix="TRACELORE_", extra="ignore", frozen=True)

    signatures_dir: Path = Field(DEFAULT_SIGNATURES, description="folder of signature YAML files")
    data_dir: Path = Field(Path("data"), description="where the default SQLite database lives")
    database_url: str = Field("", description="SQLAlchemy URL; empty means SQLite in data_dir")
    host: str = Field("127.0.0.1", description="address `tracelore serve` binds")
    port: int = Field(8000, ge=0, le=65535, description="port `tracelore serve` binds")
    workers: int = Field(1, ge=1, le=64, description="uvicorn worker processes")
    base_url: str = Field("", description="public URL of the service, for permalinks")
    max_upload_bytes: int = Field(50 << 20, ge=1024, description="largest log accepted, after decompression")
    max_in_flight: int = Field(4, ge=1, description="diagnoses run at once per process; more get 503")
    retry_after: int = Field(5, ge=1, description="seconds a client is told to wait after a 503")
    store_log: bool = Field(False, description="keep the whole log, not only the evidence windows")
    context_lines: int = Field(5, ge=0, le=50, description="log lines kept before and after each evidence line")
    retention_days: int = Field(30, ge=0, description="days a stored diagnosis is kept; 0 keeps it forever")
    forwarded_allow_ips: str = Field(
        "127.0.0.1", description="proxies whose X-Forwarded-* headers `tracelore serve` trusts (comma list or *)"
    )
    secret_key: str = Field("", description="signs sessions and hashes client addresses; set it in production")

    @field_validator("database_url")
    @classmethod
    def _normalise_url(cls, value: str) -> str:
        # Platform URLs say postgres://; SQLAlchemy wants a driver name.
        for prefix in ("postgres://", "postgresql://"):
            if value.startswith(prefix):
                return "postgresql+psycopg://" + value[len(prefix) :]
        return value

    @property
    def effective_database_url(self) -> str:
        """The configured URL, or SQLite in the data directory."""
        return self.database_url or f"sqlite:///{self.data_dir.resolve() / 'tracelore.sqlite'}"
