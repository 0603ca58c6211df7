# volcano-py: `make image` (tools/image.mk). Stage 1 builds the wheel; stage 2 installs it into a slim Python
# image and runs as a non-root user (uid 65532), so the manifests' runAsNonRoot and read-only root hold.
FROM python:3.11-slim AS build
WORKDIR /src
RUN pip install --no-cache-dir build==1.2.2
COPY pyproject.toml README.md ./
COPY scheduler ./scheduler
COPY crds ./crds
RUN python -m build --wheel --outdir /dist

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
COPY --from=build /dist/*.whl /tmp/
RUN pip install --no-cache-dir /tmp/*.whl && rm -f /tmp/*.whl \
 && groupadd --gid 65532 volcano && useradd --uid 65532 --gid 65532 --no-create-home --shell /sbin/nologin volcano
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["volcano-py"]
CMD ["scheduler", "--help"]
