# web/web.mk — the web pages, assembled into $(BUILD)/web for ramexd to serve.
# Included by the top-level Makefile (see docs/CONVENTIONS.md).
#
# The pages are plain HTML, CSS and ES modules from this folder. The two
# chart libraries come from the npm registry at build time: `npm ci` with the
# committed package-lock.json, into $(BUILD)/web-npm, so that nothing from
# node_modules is committed and the pages never reach the internet at run
# time. The served tree is rebuilt whole into a temporary folder and moved
# into place, so ramexd never serves a half-copied one.

WEB_OUT  := $(BUILD)/web
WEB_NPM  := $(BUILD)/web-npm
WEB_SRC  := $(wildcard web/*.html web/css/*.css web/js/*.js)
WEB_LOCK := $(WEB_NPM)/node_modules/.package-lock.json

# Only the files the pages load, plus the licences that must travel with
# them, as package/file=served-name. The served tree is at most two levels
# deep (/web/vendor/x.js) because ramexd's route patterns match one segment
# each; licences get a .txt name so they are served as text.
WEB_VENDOR := \
  lightweight-charts/dist/lightweight-charts.standalone.production.mjs=lightweight-charts.mjs \
  lightweight-charts/LICENSE=lightweight-charts-LICENSE.txt \
  uplot/dist/uPlot.esm.js=uPlot.esm.js \
  uplot/dist/uPlot.min.css=uPlot.min.css \
  uplot/LICENSE=uplot-LICENSE.txt

$(WEB_LOCK): web/package.json web/package-lock.json
	@mkdir -p $(WEB_NPM)
	cp web/package.json web/package-lock.json $(WEB_NPM)/
	cd $(WEB_NPM) && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	@touch $@

$(WEB_OUT)/.stamp: $(WEB_SRC) $(WEB_LOCK) web/web.mk
	rm -rf $(WEB_OUT).tmp
	mkdir -p $(WEB_OUT).tmp
	cd web && cp --parents $(patsubst web/%,%,$(WEB_SRC)) $(abspath $(WEB_OUT).tmp)
	mkdir -p $(WEB_OUT).tmp/vendor
	set -e; for m in $(WEB_VENDOR); do \
	  cp $(WEB_NPM)/node_modules/$${m%%=*} $(WEB_OUT).tmp/vendor/$${m#*=}; \
	done
	touch $(WEB_OUT).tmp/.stamp
	rm -rf $(WEB_OUT) && mv $(WEB_OUT).tmp $(WEB_OUT)

.PHONY: web
web: $(WEB_OUT)/.stamp
ALL_EXTRA += $(WEB_OUT)/.stamp

# exchange/static.c is the part of ramexd that serves this folder; its unit
# test lives with the web fragment so that the two change together.
$(call unit_test,test_static,tests/unit/test_static.c exchange/static.c $(ERR_SRC))
